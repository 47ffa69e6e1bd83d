package tick

// A tool's argument schema, derived from its Go struct: each exported
// field is a property named by its `json` tag; `omitempty` (or a pointer)
// makes it optional, every other field is required; `tick:"min=0,max=60000"`
// adds bounds (min, max, minLength, maxLength, minItems, maxItems), and
// `tick:"desc=..."` must be last when used. Arguments the struct does not
// name are refused.

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxInteger is the largest integer the protocol carries exactly (§2.2).
const maxInteger = 1<<53 - 1

// NoArgs is the argument type of a tool that takes none.
type NoArgs struct{}

func schemaOf(t reflect.Type) map[string]any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Slice, reflect.Array:
		return map[string]any{"type": "array", "items": schemaOf(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object"}
	case reflect.Struct:
		props, required := map[string]any{}, []any{}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			s := schemaOf(f.Type)
			for _, kv := range strings.Split(f.Tag.Get("tick"), ",") {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					continue
				}
				if k == "desc" {
					s["description"] = v
					continue
				}
				if n, err := strconv.ParseFloat(v, 64); err == nil {
					key := map[string]string{"min": "minimum", "max": "maximum"}[k]
					if key == "" {
						key = k
					}
					s[key] = n
				}
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
		return s
	}
	return map[string]any{}
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
	return ""
}
