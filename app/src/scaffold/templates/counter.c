/*
 * The counter of the Tick protocol's Appendix A, in C with nothing but libc.
 *
 * One source, two builds (see build.sh):
 *   - wasm32-wasip1 with clang + wasi-libc: a sandboxed core module. The
 *     view shows what it writes to stderr; a wasip1 module gets no keys.
 *   - natively with cc: the view is its PTY, and `+` / `-` typed there
 *     change the value (read from /dev/tty).
 *
 * The event loop is one poll() over stdin (and the terminal when native)
 * with a timeout for the next timer: the `auto` tool makes the counter add
 * one every N milliseconds, which keeps working while the Tick waits for
 * requests. (Go's wasip1 port cannot do this: its timers do not fire while
 * it is blocked reading stdin.)
 *
 * Protocol duties, and where they are met:
 *   - stdout carries only protocol lines, each written whole (send());
 *   - every request with an unsigned integer id gets exactly one response;
 *     lines that do not parse, or have no usable id or method, are dropped
 *     without a reply (handle_line());
 *   - a call with another revision gets -32004, an unknown tool or bad
 *     arguments -32602, both before anything changes (call());
 *   - every change is exactly one tick/update with the next seq (change()).
 *
 * Everything the host sends is bounded: a line longer than MAX_LINE is
 * discarded up to its newline, JSON nesting deeper than MAX_DEPTH does not
 * parse.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifndef __wasi__
#include <termios.h>
#endif

/* Longest request line kept; longer lines are discarded. */
#define MAX_LINE (1 << 20)
/* Deepest JSON nesting accepted. */
#define MAX_DEPTH 32
/* Changes `history` keeps, and how many of them the state carries. */
#define HISTORY 256
#define IN_STATE 32
/* Bounds of the `auto` period, in milliseconds. */
#define AUTO_MIN_MS 20
#define AUTO_MAX_MS 60000

#define REVISION "1"

/* ---- a small JSON reader: a tree of nodes pointing into the line ---- */

enum kind { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };

struct node {
    enum kind kind;
    const char *text; /* raw text of strings (no quotes, escapes kept) and numbers */
    size_t len;
    int child;        /* first element/member value, -1 if none */
    int next;         /* next sibling, -1 if none */
    const char *key;  /* member name (raw) when inside an object */
    size_t key_len;
};

struct parser {
    const char *p, *end;
    struct node *nodes;
    int count, cap;
};

static void ws(struct parser *ps) {
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\r' || *ps->p == '\n'))
        ps->p++;
}

static int new_node(struct parser *ps, enum kind k) {
    if (ps->count == ps->cap) {
        int cap = ps->cap ? ps->cap * 2 : 64;
        struct node *n = realloc(ps->nodes, (size_t)cap * sizeof *n);
        if (!n)
            return -1;
        ps->nodes = n;
        ps->cap = cap;
    }
    struct node *n = &ps->nodes[ps->count];
    memset(n, 0, sizeof *n);
    n->kind = k;
    n->child = n->next = -1;
    return ps->count++;
}

/* A string's raw contents; *p is just past the opening quote. */
static int scan_string(struct parser *ps, const char **text, size_t *len) {
    const char *start = ps->p;
    while (ps->p < ps->end) {
        unsigned char c = (unsigned char)*ps->p;
        if (c == '"') {
            *text = start;
            *len = (size_t)(ps->p - start);
            ps->p++;
            return 0;
        }
        if (c < 0x20)
            return -1;
        if (c == '\\') {
            ps->p++;
            if (ps->p >= ps->end || !strchr("\"\\/bfnrtu", *ps->p))
                return -1;
        }
        ps->p++;
    }
    return -1;
}

static int parse_value(struct parser *ps, int depth);

static int parse_container(struct parser *ps, int depth, enum kind k) {
    int self = new_node(ps, k), last = -1;
    if (self < 0)
        return -1;
    ps->p++;
    ws(ps);
    char close = k == J_OBJ ? '}' : ']';
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        return self;
    }
    for (;;) {
        const char *key = NULL;
        size_t key_len = 0;
        if (k == J_OBJ) {
            ws(ps);
            if (ps->p >= ps->end || *ps->p != '"')
                return -1;
            ps->p++;
            if (scan_string(ps, &key, &key_len))
                return -1;
            ws(ps);
            if (ps->p >= ps->end || *ps->p != ':')
                return -1;
            ps->p++;
        }
        int v = parse_value(ps, depth + 1);
        if (v < 0)
            return -1;
        ps->nodes[v].key = key;
        ps->nodes[v].key_len = key_len;
        if (last < 0)
            ps->nodes[self].child = v;
        else
            ps->nodes[last].next = v;
        last = v;
        ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == close) {
            ps->p++;
            return self;
        }
        return -1;
    }
}

static int literal(struct parser *ps, const char *word, enum kind k) {
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n))
        return -1;
    ps->p += n;
    return new_node(ps, k);
}

static int parse_value(struct parser *ps, int depth) {
    if (depth > MAX_DEPTH)
        return -1;
    ws(ps);
    if (ps->p >= ps->end)
        return -1;
    char c = *ps->p;
    if (c == '{')
        return parse_container(ps, depth, J_OBJ);
    if (c == '[')
        return parse_container(ps, depth, J_ARR);
    if (c == '"') {
        int n = new_node(ps, J_STR);
        if (n < 0)
            return -1;
        ps->p++;
        return scan_string(ps, &ps->nodes[n].text, &ps->nodes[n].len) ? -1 : n;
    }
    if (c == 't')
        return literal(ps, "true", J_BOOL);
    if (c == 'f')
        return literal(ps, "false", J_BOOL);
    if (c == 'n')
        return literal(ps, "null", J_NULL);
    if (c == '-' || (c >= '0' && c <= '9')) {
        const char *start = ps->p;
        if (*ps->p == '-')
            ps->p++;
        if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9')
            return -1;
        while (ps->p < ps->end && strchr("0123456789.eE+-", *ps->p))
            ps->p++;
        int n = new_node(ps, J_NUM);
        if (n < 0)
            return -1;
        ps->nodes[n].text = start;
        ps->nodes[n].len = (size_t)(ps->p - start);
        return n;
    }
    return -1;
}

/* The member `key` of object node `obj`, or -1. */
static int member(struct parser *ps, int obj, const char *key) {
    if (obj < 0 || ps->nodes[obj].kind != J_OBJ)
        return -1;
    size_t n = strlen(key);
    for (int c = ps->nodes[obj].child; c >= 0; c = ps->nodes[c].next)
        if (ps->nodes[c].key_len == n && !memcmp(ps->nodes[c].key, key, n))
            return c;
    return -1;
}

static int members(struct parser *ps, int obj) {
    int count = 0;
    for (int c = ps->nodes[obj].child; c >= 0; c = ps->nodes[c].next)
        count++;
    return count;
}

static int is_str(struct parser *ps, int n, const char *s) {
    return n >= 0 && ps->nodes[n].kind == J_STR && ps->nodes[n].len == strlen(s) &&
           !memcmp(ps->nodes[n].text, s, ps->nodes[n].len);
}

/* A JSON integer without fraction or exponent that fits in int64. */
static int as_int(struct parser *ps, int n, int64_t *out) {
    if (n < 0 || ps->nodes[n].kind != J_NUM)
        return -1;
    const char *t = ps->nodes[n].text;
    size_t len = ps->nodes[n].len, i = 0;
    int neg = t[0] == '-';
    if (neg)
        i++;
    if (i == len || len - i > 19)
        return -1;
    uint64_t v = 0;
    for (; i < len; i++) {
        if (t[i] < '0' || t[i] > '9')
            return -1;
        v = v * 10 + (uint64_t)(t[i] - '0');
    }
    if (v > (uint64_t)INT64_MAX + (uint64_t)neg)
        return -1;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

/* ---- output: each frame is one write of one complete line ---- */

static char *out;
static size_t out_len, out_cap;

static void put(const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(out + out_len, out_cap - out_len, fmt, ap);
        va_end(ap);
        if (n < 0)
            return;
        if ((size_t)n < out_cap - out_len) {
            out_len += (size_t)n;
            return;
        }
        size_t cap = out_cap ? out_cap * 2 : 4096;
        while (cap - out_len <= (size_t)n)
            cap *= 2;
        char *b = realloc(out, cap);
        if (!b)
            exit(70);
        out = b;
        out_cap = cap;
    }
}

/* Writes the frame in `out` plus its newline, then empties `out`. */
static void send(void) {
    put("\n");
    size_t done = 0;
    while (done < out_len) {
        ssize_t n = write(1, out + done, out_len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            exit(0); /* the host is gone */
        done += (size_t)n;
    }
    out_len = 0;
}

/* ---- the counter ---- */

struct change {
    uint64_t seq;
    int64_t value;
};

static int64_t value;
static uint64_t seq;
static struct change history[HISTORY];
static size_t history_len;
static int auto_ms;          /* 0: off */
static int64_t next_auto_ms; /* monotonic time of the next automatic step */

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void put_recent(size_t keep) {
    size_t start = history_len > keep ? history_len - keep : 0;
    put("[");
    for (size_t i = start; i < history_len; i++)
        put("%s{\"seq\":%llu,\"value\":%lld}", i > start ? "," : "",
            (unsigned long long)history[i].seq, (long long)history[i].value);
    put("]");
}

static void put_state(void) {
    put("{\"seq\":%llu,\"data\":{\"value\":%lld,\"recent\":", (unsigned long long)seq,
        (long long)value);
    put_recent(IN_STATE);
    put("}}");
}

/* The view: whatever goes to stderr is the Tick's screen. */
static void draw(void) {
    char auto_text[48] = "off";
    if (auto_ms)
        snprintf(auto_text, sizeof auto_text, "+1 every %d ms", auto_ms);
    fprintf(stderr,
            "\x1b[H\x1b[2J"
            "+-- Counter (C) --------------------+\r\n"
            "| Counter: %-24lld |\r\n"
            "| auto: %-27s |\r\n"
            "+-----------------------------------+\r\n"
            "[+] add one  [-] subtract one (native build only)\r\n",
            (long long)value, auto_text);
    fflush(stderr);
}

/* The one place the value changes: one change, one update. */
static void change(int64_t by) {
    value += by;
    seq++;
    if (history_len == HISTORY) {
        memmove(history, history + 1, (HISTORY - 1) * sizeof *history);
        history_len--;
    }
    history[history_len++] = (struct change){seq, value};
    put("{\"jsonrpc\":\"2.0\",\"method\":\"tick/update\",\"params\":");
    put_state();
    put("}");
    send();
    draw();
}

static const char DESCRIPTOR[] =
    "{\"protocol\":3,\"kind\":\"example.counter\",\"title\":\"Counter\","
    "\"description\":\"Keyboard and tool calls share one value.\",\"revision\":\"" REVISION "\","
    "\"tools\":["
    "{\"name\":\"increment\",\"description\":\"Add an integer to the counter.\","
    "\"input_schema\":{\"type\":\"object\",\"properties\":{\"amount\":{\"type\":\"integer\"}},"
    "\"required\":[\"amount\"],\"additionalProperties\":false},\"mutates\":true},"
    "{\"name\":\"history\",\"description\":\"Read the last 256 changes.\","
    "\"input_schema\":{\"type\":\"object\",\"additionalProperties\":false},\"mutates\":false},"
    "{\"name\":\"auto\",\"description\":\"Add one every every_ms milliseconds (20 to 60000); 0 "
    "stops.\",\"input_schema\":{\"type\":\"object\",\"properties\":{\"every_ms\":{\"type\":"
    "\"integer\",\"minimum\":0,\"maximum\":60000}},\"required\":[\"every_ms\"],"
    "\"additionalProperties\":false},\"mutates\":true}],"
    "\"recover_with\":\"history\",\"state\":{\"series\":[{\"path\":\"/recent\",\"newest\":\"last\"}]}}";

static void reply_error(uint64_t id, int code, const char *message) {
    put("{\"jsonrpc\":\"2.0\",\"id\":%llu,\"error\":{\"code\":%d,\"message\":\"%s\"}}",
        (unsigned long long)id, code, message);
    send();
}

static void reply_start(uint64_t id) {
    put("{\"jsonrpc\":\"2.0\",\"id\":%llu,\"result\":", (unsigned long long)id);
}

/* Handles tick/call; every refusal happens before anything changes. */
static void call(struct parser *ps, uint64_t id, int params) {
    if (!is_str(ps, member(ps, params, "revision"), REVISION)) {
        reply_error(id, -32004,
                    "the Tick Tool catalog changed; describe the Tick and prepare the call again");
        return;
    }
    int tool = member(ps, params, "tool");
    int args = member(ps, params, "args");
    if (args < 0 || ps->nodes[args].kind != J_OBJ) {
        reply_error(id, -32602, "args must be an object");
        return;
    }
    if (is_str(ps, tool, "increment")) {
        int64_t amount;
        if (members(ps, args) != 1 || as_int(ps, member(ps, args, "amount"), &amount)) {
            reply_error(id, -32602, "increment takes {\\\"amount\\\": integer} and nothing else");
            return;
        }
        if ((amount > 0 && value > INT64_MAX - amount) || (amount < 0 && value < INT64_MIN - amount)) {
            reply_error(id, -32602, "the counter would overflow");
            return;
        }
        change(amount);
        reply_start(id);
        put("{\"value\":%lld}}", (long long)value);
        send();
    } else if (is_str(ps, tool, "history")) {
        if (members(ps, args) != 0) {
            reply_error(id, -32602, "history takes no arguments");
            return;
        }
        reply_start(id);
        put("{\"recent\":");
        put_recent(HISTORY);
        put("}}");
        send();
    } else if (is_str(ps, tool, "auto")) {
        int64_t ms;
        if (members(ps, args) != 1 || as_int(ps, member(ps, args, "every_ms"), &ms) || ms < 0 ||
            ms > AUTO_MAX_MS || (ms > 0 && ms < AUTO_MIN_MS)) {
            reply_error(id, -32602, "auto takes {\\\"every_ms\\\": 0 or 20..60000}");
            return;
        }
        auto_ms = (int)ms;
        next_auto_ms = now_ms() + auto_ms;
        draw();
        reply_start(id);
        put("{\"every_ms\":%d}}", auto_ms);
        send();
    } else {
        reply_error(id, -32602, "unknown tool");
    }
}

/* One line from the host. */
static void handle_line(const char *line, size_t len) {
    struct parser ps = {line, line + len, NULL, 0, 0};
    int root = parse_value(&ps, 0);
    ws(&ps);
    int64_t id;
    int method = member(&ps, root, "method");
    /* Unparseable, trailing garbage, no usable id or no method: drop it. */
    if (root < 0 || ps.p != ps.end || as_int(&ps, member(&ps, root, "id"), &id) || id < 0 ||
        id > 9007199254740991LL || method < 0 || ps.nodes[method].kind != J_STR) {
        free(ps.nodes);
        return;
    }
    int params = member(&ps, root, "params");
    if (is_str(&ps, method, "tick/describe")) {
        reply_start((uint64_t)id);
        put("%s}", DESCRIPTOR);
        send();
    } else if (is_str(&ps, method, "tick/read")) {
        reply_start((uint64_t)id);
        put_state();
        put("}");
        send();
    } else if (is_str(&ps, method, "tick/call")) {
        if (params < 0 || ps.nodes[params].kind != J_OBJ)
            reply_error((uint64_t)id, -32602, "tick/call needs params");
        else
            call(&ps, (uint64_t)id, params);
    } else {
        reply_error((uint64_t)id, -32601, "unknown method");
    }
    free(ps.nodes);
}

int main(void) {
    static char buf[64 * 1024];
    char *line = malloc(MAX_LINE);
    size_t line_len = 0;
    int discarding = 0; /* inside a line longer than MAX_LINE */
    int tty = -1;
    if (!line)
        return 70;
#ifndef __wasi__
    /* Natively the view is our controlling terminal: take keys from it,
       unbuffered and unechoed. */
    tty = open("/dev/tty", O_RDONLY | O_NONBLOCK);
    if (tty >= 0) {
        struct termios t;
        if (tcgetattr(tty, &t) == 0) {
            t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
            t.c_cc[VMIN] = 1;
            t.c_cc[VTIME] = 0;
            tcsetattr(tty, TCSANOW, &t);
        }
    }
#endif
    draw();
    for (;;) {
        int timeout = -1;
        if (auto_ms) {
            int64_t wait = next_auto_ms - now_ms();
            timeout = wait < 0 ? 0 : (int)wait;
        }
        struct pollfd fds[2] = {{.fd = 0, .events = POLLIN}, {.fd = tty, .events = POLLIN}};
        int n = poll(fds, tty >= 0 ? 2 : 1, timeout);
        if (n < 0 && errno != EINTR)
            return 71;
        if (auto_ms && now_ms() >= next_auto_ms) {
            next_auto_ms += auto_ms;
            /* After a stall, do not replay every missed step at once. */
            if (next_auto_ms < now_ms())
                next_auto_ms = now_ms() + auto_ms;
            if (value < INT64_MAX)
                change(1);
        }
        if (n > 0 && tty >= 0 && (fds[1].revents & POLLIN)) {
            char keys[64];
            ssize_t k = read(tty, keys, sizeof keys);
            for (ssize_t i = 0; i < k; i++) {
                if (keys[i] == '+' && value < INT64_MAX)
                    change(1);
                else if (keys[i] == '-' && value > INT64_MIN)
                    change(-1);
            }
        }
        if (n > 0 && (fds[0].revents & (POLLIN | POLLHUP | POLLERR))) {
            ssize_t got = read(0, buf, sizeof buf);
            if (got < 0 && (errno == EINTR || errno == EAGAIN))
                continue;
            if (got <= 0)
                return 0; /* stdin closed: nothing is in flight, so exit */
            for (ssize_t i = 0; i < got; i++) {
                if (buf[i] == '\n') {
                    if (!discarding)
                        handle_line(line, line_len);
                    line_len = 0;
                    discarding = 0;
                } else if (discarding) {
                    continue;
                } else if (line_len == MAX_LINE) {
                    discarding = 1;
                } else {
                    line[line_len++] = buf[i];
                }
            }
        }
    }
}
