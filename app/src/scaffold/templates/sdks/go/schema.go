package tick

// A tool's argument schema, derived from its Go struct: each exported
// field is a property named by its `json` tag, or without one by its Go
// name in snake_case (EveryMs is every_ms, UserID user_id), the way
// tools' arguments are usually spelled, so a struct needs no tags to be a
// tool's arguments; `omitempty` (or a pointer) makes it optional, every
// other field is required. Arguments the struct does not name are refused.
//
// A `tick` tag adds rules, comma-separated:
//
//	min=N, max=N              a number's bounds (minimum, maximum)
//	minLength=N, maxLength=N  a string's length in characters
//	minItems=N, maxItems=N    a slice's length
//	or=V                      V is allowed too, whatever the rules above say
//	                          (repeatable): "min=20,max=60000,or=0" is 0 or
//	                          20 to 60000
//	desc=TEXT                 the argument's description (last: TEXT may
//	                          hold commas)
//
// The schema says each rule (or= as an anyOf of the values and the rules,
// with a number's bounds widened to take the values in), and a call that
// breaks one is refused (-32602) before the tool runs. A tag the SDK cannot
// read is a declaration problem: tick/describe fails with it, so `tickbox
// check` and the Tick's stderr say which field.

import (
	"encoding"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxInteger is the largest integer the protocol carries exactly (§2.2).
const maxInteger = 1<<53 - 1

// NoArgs is the argument type of a tool that takes none.
type NoArgs struct{}

// schemaOf is t's schema, and what in its tags cannot be read ("" when all can).
func schemaOf(t reflect.Type) (map[string]any, string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool:
		return map[string]any{"type": "boolean"}, ""
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}, ""
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}, ""
	case reflect.String:
		return map[string]any{"type": "string"}, ""
	case reflect.Slice, reflect.Array:
		items, bad := schemaOf(t.Elem())
		return map[string]any{"type": "array", "items": items}, bad
	case reflect.Map:
		return map[string]any{"type": "object"}, ""
	case reflect.Struct:
		props, required, problem := map[string]any{}, []any{}, ""
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, opts, ok := fieldName(f)
			if !ok {
				continue
			}
			s, bad := schemaOf(f.Type)
			if bad == "" {
				bad = applyTag(s, f.Tag.Get("tick"))
				if bad != "" {
					bad = fmt.Sprintf("the tick tag of %s.%s: %s", t, f.Name, bad)
				}
			}
			if problem == "" {
				problem = bad
			}
			props[name] = s
			if !strings.Contains(opts, "omitempty") && f.Type.Kind() != reflect.Pointer {
				required = append(required, name)
			}
		}
		s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
		if len(required) > 0 {
			s["required"] = required
		}
		return s, problem
	}
	return map[string]any{}, ""
}

// tagRules: the schema keyword of each bound a tick tag may set, and the
// type it applies to.
var tagRules = map[string]struct{ keyword, kind string }{
	"min": {"minimum", "number"}, "max": {"maximum", "number"},
	"minLength": {"minLength", "string"}, "maxLength": {"maxLength", "string"},
	"minItems": {"minItems", "array"}, "maxItems": {"maxItems", "array"},
}

// applyTag adds the rules of a field's tick tag to its schema s; what cannot
// be read, or "".
func applyTag(s map[string]any, tag string) string {
	kind, _ := s["type"].(string)
	if kind == "integer" {
		kind = "number"
	}
	rules, alsoAllowed := map[string]any{}, []any{}
	for tag != "" {
		var kv string
		if strings.HasPrefix(tag, "desc=") {
			kv, tag = tag, "" // the rest, commas and all
		} else {
			kv, tag, _ = strings.Cut(tag, ",")
		}
		k, v, ok := strings.Cut(kv, "=")
		rule, known := tagRules[k]
		switch {
		case !ok:
			return fmt.Sprintf("%q is not key=value", kv)
		case k == "desc":
			s["description"] = v
		case k == "or":
			value, bad := tagValue(s, v)
			if bad != "" {
				return bad
			}
			alsoAllowed = append(alsoAllowed, value)
		case !known:
			return fmt.Sprintf("%q is not a rule (min, max, minLength, maxLength, minItems, maxItems, or, desc)", k)
		case rule.kind != kind:
			return fmt.Sprintf("%s is for a %s, not %s", k, rule.kind, article(s["type"]))
		default:
			n, err := strconv.ParseFloat(v, 64)
			if err != nil || math.IsInf(n, 0) || math.IsNaN(n) || (rule.kind != "number" && (n < 0 || n != math.Trunc(n))) {
				return fmt.Sprintf("%s=%s is not a bound", k, v)
			}
			rules[rule.keyword] = n
		}
	}
	if len(alsoAllowed) == 0 {
		for k, v := range rules {
			s[k] = v
		}
		return ""
	}
	// anyOf: one of the values, or the rules. A number's bounds stay at
	// the top too, widened to take the values in, for a reader that
	// looks only at minimum and maximum.
	anyOf := []any{}
	for _, v := range alsoAllowed {
		anyOf = append(anyOf, map[string]any{"const": v})
	}
	if len(rules) > 0 {
		anyOf = append(anyOf, rules)
	}
	s["anyOf"] = anyOf
	for k, widen := range map[string]func(a, b float64) float64{"minimum": math.Min, "maximum": math.Max} {
		bound, has := rules[k].(float64)
		if !has {
			continue
		}
		for _, v := range alsoAllowed {
			bound = widen(bound, v.(float64))
		}
		s[k] = bound
	}
	return ""
}

// tagValue is v, a value an or= rule allows, as its field's type reads it.
func tagValue(s map[string]any, v string) (any, string) {
	switch s["type"] {
	case "integer":
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= -maxInteger && n <= maxInteger {
			return float64(n), ""
		}
	case "number":
		if n, err := strconv.ParseFloat(v, 64); err == nil && !math.IsInf(n, 0) && !math.IsNaN(n) {
			return n, ""
		}
	case "string":
		return v, ""
	default:
		return nil, fmt.Sprintf("or= is for a number or a string, not %s", article(s["type"]))
	}
	return nil, fmt.Sprintf("or=%s is not %s", v, article(s["type"]))
}

// article: "an integer", "a string", ... for a schema's type.
func article(kind any) string {
	k, _ := kind.(string)
	if k == "" {
		return "a value of any type"
	}
	if strings.ContainsAny(k[:min(1, len(k))], "aeiou") {
		return "an " + k
	}
	return "a " + k
}

// fieldName is the argument a struct field stands for (ok false: none).
func fieldName(f reflect.StructField) (name, opts string, ok bool) {
	if !f.IsExported() {
		return "", "", false
	}
	name, opts, _ = strings.Cut(f.Tag.Get("json"), ",")
	if name == "-" {
		return "", "", false
	}
	if name == "" {
		name = snake(f.Name)
	}
	return name, opts, true
}

// snake spells a Go name in snake_case: an underscore before each capital
// that starts a word (after a lower-case letter or digit, or the last
// capital of an acronym before a lower-case letter), all in lower case.
func snake(name string) string {
	rs := []rune(name)
	var b strings.Builder
	for i, r := range rs {
		if unicode.IsUpper(r) && i > 0 {
			prev := rs[i-1]
			nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || (unicode.IsUpper(prev) && nextLower) {
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// decode stores v (decoded with UseNumber and already checked against the
// schema of dst's type) in dst, naming fields as schemaOf does. It walks the
// decoded value once, so a call's arguments are parsed once (re-encoding
// them for encoding/json would parse them twice). Types that decode
// themselves (json.Unmarshaler, encoding.TextUnmarshaler), interfaces and
// other kinds it has no rule for go through encoding/json.
func decode(v any, dst reflect.Value) error {
	if dst.CanAddr() {
		switch dst.Addr().Interface().(type) {
		case json.Unmarshaler, encoding.TextUnmarshaler:
			return viaJSON(v, dst)
		}
	}
	if v == nil {
		return nil // null leaves the zero value, as encoding/json does
	}
	mismatch := func() error { return fmt.Errorf("cannot use %s as %s", kindOf(v), dst.Type()) }
	switch dst.Kind() {
	case reflect.Pointer:
		p := reflect.New(dst.Type().Elem())
		if err := decode(v, p.Elem()); err != nil {
			return err
		}
		dst.Set(p)
	case reflect.Bool:
		b, ok := v.(bool)
		if !ok {
			return mismatch()
		}
		dst.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := v.(json.Number)
		i, err := strconv.ParseInt(string(n), 10, 64)
		if !ok || err != nil || dst.OverflowInt(i) {
			return fmt.Errorf("%s does not fit %s", kindOf(v), dst.Type())
		}
		dst.SetInt(i)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		n, ok := v.(json.Number)
		u, err := strconv.ParseUint(string(n), 10, 64)
		if !ok || err != nil || dst.OverflowUint(u) {
			return fmt.Errorf("%s does not fit %s", kindOf(v), dst.Type())
		}
		dst.SetUint(u)
	case reflect.Float32, reflect.Float64:
		n, ok := v.(json.Number)
		f, err := n.Float64()
		if !ok || err != nil || dst.OverflowFloat(f) {
			return fmt.Errorf("%s does not fit %s", kindOf(v), dst.Type())
		}
		dst.SetFloat(f)
	case reflect.String:
		s, ok := v.(string)
		if !ok {
			return mismatch()
		}
		dst.SetString(s)
	case reflect.Slice:
		items, ok := v.([]any)
		if !ok {
			return mismatch()
		}
		out := reflect.MakeSlice(dst.Type(), len(items), len(items))
		for i, item := range items {
			if err := decode(item, out.Index(i)); err != nil {
				return err
			}
		}
		dst.Set(out)
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok || dst.Type().Key().Kind() != reflect.String {
			return viaJSON(v, dst)
		}
		out := reflect.MakeMapWithSize(dst.Type(), len(m))
		for k, item := range m {
			elem := reflect.New(dst.Type().Elem()).Elem()
			if err := decode(item, elem); err != nil {
				return err
			}
			out.SetMapIndex(reflect.ValueOf(k).Convert(dst.Type().Key()), elem)
		}
		dst.Set(out)
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return mismatch()
		}
		for i := 0; i < dst.NumField(); i++ {
			name, _, ok := fieldName(dst.Type().Field(i))
			if item, present := m[name]; ok && present {
				if err := decode(item, dst.Field(i)); err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
			}
		}
	default:
		return viaJSON(v, dst)
	}
	return nil
}

// viaJSON decodes v into dst with encoding/json (dst is addressable: decode
// starts from a new value and only ever descends into its parts).
func viaJSON(v any, dst reflect.Value) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, dst.Addr().Interface())
}

func kindOf(v any) string {
	switch v.(type) {
	case json.Number:
		return "the number " + string(v.(json.Number))
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return "null"
}

func isInteger(n json.Number) bool {
	if _, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		return true
	}
	f, err := n.Float64()
	return err == nil && f == math.Trunc(f) && math.Abs(f) <= maxInteger
}

func number(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil
}

// problem says why v (decoded with UseNumber) breaks schema, or "".
func problem(schema map[string]any, v any, where string) string {
	kind, _ := schema["type"].(string)
	ok := true
	switch kind {
	case "integer":
		n, isNum := v.(json.Number)
		ok = isNum && isInteger(n)
	case "number":
		_, ok = number(v)
	case "string":
		_, ok = v.(string)
	case "boolean":
		_, ok = v.(bool)
	case "array":
		_, ok = v.([]any)
	case "object":
		_, ok = v.(map[string]any)
	}
	if !ok {
		return fmt.Sprintf("%s must be of type %s", where, kind)
	}
	if f, isNum := number(v); isNum {
		if m, has := schema["minimum"].(float64); has && f < m {
			return fmt.Sprintf("%s must be at least %v", where, m)
		}
		if m, has := schema["maximum"].(float64); has && f > m {
			return fmt.Sprintf("%s must be at most %v", where, m)
		}
	}
	length := -1
	switch x := v.(type) {
	case string:
		length = utf8.RuneCountInString(x) // JSON Schema counts code points
	case []any:
		length = len(x)
		if items, has := schema["items"].(map[string]any); has {
			for i, item := range x {
				if p := problem(items, item, fmt.Sprintf("%s[%d]", where, i)); p != "" {
					return p
				}
			}
		}
	case map[string]any:
		props, has := schema["properties"].(map[string]any)
		if !has {
			break
		}
		req, _ := schema["required"].([]any)
		for _, name := range req {
			if _, present := x[name.(string)]; !present {
				return fmt.Sprintf("%s.%s is required", where, name)
			}
		}
		for name, item := range x {
			s, known := props[name].(map[string]any)
			if !known {
				return fmt.Sprintf("%s.%s is not an argument of this tool", where, name)
			}
			if p := problem(s, item, where+"."+name); p != "" {
				return p
			}
		}
	}
	for _, k := range []string{"minLength", "minItems"} {
		if m, has := schema[k].(float64); has && length >= 0 && float64(length) < m {
			return fmt.Sprintf("%s breaks %s %v", where, k, m)
		}
	}
	for _, k := range []string{"maxLength", "maxItems"} {
		if m, has := schema[k].(float64); has && length >= 0 && float64(length) > m {
			return fmt.Sprintf("%s breaks %s %v", where, k, m)
		}
	}
	if c, has := schema["const"]; has && !equal(c, v) {
		return fmt.Sprintf("%s must be %s", where, literal(c))
	}
	if anyOf, has := schema["anyOf"].([]any); has {
		var forms []string
		for _, branch := range anyOf {
			b, _ := branch.(map[string]any)
			if problem(b, v, where) == "" {
				return ""
			}
			forms = append(forms, form(b))
		}
		return fmt.Sprintf("%s must be %s", where, strings.Join(forms, " or "))
	}
	return ""
}

// equal: whether v (decoded with UseNumber) is c, a const of a schema
// made by applyTag (a float64 or a string).
func equal(c, v any) bool {
	if f, isNum := c.(float64); isNum {
		n, ok := number(v)
		return ok && n == f
	}
	return c == v
}

func literal(c any) string {
	if s, isStr := c.(string); isStr {
		return strconv.Quote(s)
	}
	return fmt.Sprint(c)
}

// form says in words what one anyOf branch of applyTag allows.
func form(b map[string]any) string {
	if c, has := b["const"]; has {
		return literal(c)
	}
	lo, hasLo := b["minimum"]
	hi, hasHi := b["maximum"]
	switch {
	case hasLo && hasHi:
		return fmt.Sprintf("from %v to %v", lo, hi)
	case hasLo:
		return fmt.Sprintf("at least %v", lo)
	case hasHi:
		return fmt.Sprintf("at most %v", hi)
	}
	var rules []string
	for _, k := range []string{"minLength", "maxLength", "minItems", "maxItems"} {
		if m, has := b[k]; has {
			rules = append(rules, fmt.Sprintf("%s %v", k, m))
		}
	}
	return "within " + strings.Join(rules, ", ")
}
