package jsonscan

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// compactCases are valid and invalid documents for AppendCompact, among them every
// kind of value, white space everywhere it may stand, each escape, and what
// encoding/json refuses.
var compactCases = []string{
	`{"role":"assistant","content":"x"}`,
	" \t\r\n{ \"a\" : [ 1 , -2.5e+3 , true , false , null , \"s\" ] , \"b\" : { } , \"c\" : [ ] }\n ",
	`"plain"`, `""`, `0`, `-0`, `12`, `1.5`, `1e5`, `1E-5`, `-0.0e0`, `true`, `false`, `null`,
	`"\"\\\/\b\f\n\r\t\u00e9\uD83D\uDE00"`, `"tab	in"`, "\"caf\xc3\xa9 \xff\xfe\"", `"\u12"`, `"\x"`, `"\u00G0"`,
	`{"content":"line one\nline two \"quoted\" and a backslash \\ then more text to pass eight bytes"}`,
	`[[[[[]]]]]`, `[{"a":[{"b":{}}]}]`, `{"a":1,"a":2}`,
	``, ` `, `{`, `}`, `[`, `]`, `[1,]`, `{"a":1,}`, `{"a"}`, `{"a":}`, `{a:1}`, `{"a" 1}`, `[1 2]`,
	`01`, `-`, `1.`, `.5`, `1e`, `1e+`, `+1`, `0x10`, `NaN`, `Infinity`, `tru`, `nul`, `truex`, `nullnull`,
	`"unterminated`, `"ctl` + "\x01" + `"`, "\"nl\n\"", `1 2`, `{} {}`, `[1]]`, `{"a":1}}`, `"\`,
	strings.Repeat("[", MaxCompactDepth) + strings.Repeat("]", MaxCompactDepth),
	strings.Repeat("[", MaxCompactDepth+1) + strings.Repeat("]", MaxCompactDepth+1),
	strings.Repeat(`{"k":`, 70) + `0` + strings.Repeat("}", 70),
}

// checkCompact fails t unless AppendCompact, writing after a prefix, agrees with
// json.Compact on src: the same verdict, and the same bytes when valid.
func checkCompact(t *testing.T, src []byte) {
	t.Helper()
	prefix := []byte("prefix,")
	got, ok := AppendCompact(bytes.Clone(prefix), src)
	var want bytes.Buffer
	want.Write(prefix)
	err := json.Compact(&want, src)
	switch {
	case ok != (err == nil):
		t.Fatalf("AppendCompact(%.80q) ok = %v; json.Compact's error: %v", src, ok, err)
	case ok && !bytes.Equal(got, want.Bytes()):
		t.Fatalf("AppendCompact(%.80q) = %.80q, json.Compact wrote %.80q", src, got, want.Bytes())
	case !ok && !bytes.Equal(got, prefix):
		t.Fatalf("AppendCompact(%.80q) refused it but left %q", src, got)
	}
}

func TestAppendCompactAgreesWithEncodingJSON(t *testing.T) {
	valid := 0
	for _, c := range compactCases {
		checkCompact(t, []byte(c))
		if json.Valid([]byte(c)) {
			valid++
		}
		// Every prefix of a case, which cuts tokens and strings (and their runs of
		// eight bytes) at each offset.
		for n := range len(c) {
			if len(c) < 200 {
				checkCompact(t, []byte(c[:n]))
			}
		}
	}
	if valid < 20 || valid > len(compactCases)-30 {
		t.Fatalf("%d of %d cases are valid: the corpus lost one of its kinds", valid, len(compactCases))
	}
}

// TestAppendCompactStringRuns puts each byte that ends a run of plain string bytes
// (a quote, a backslash, a control character) and a byte from 0x80 up at every
// offset of a long string, so that the eight-byte check meets each in every lane.
func TestAppendCompactStringRuns(t *testing.T) {
	for _, special := range []string{`"`, `\\`, `\"`, `\u0041`, "\x00", "\x1f", "\n", "\x7f", "\x80", "\xff", `\q`, ` `} {
		for at := range 24 {
			s := `"` + strings.Repeat("a", at) + special + strings.Repeat("b", 24-at) + `"`
			checkCompact(t, []byte(s))
			checkCompact(t, []byte(`{"k" : `+s+` }`))
		}
	}
}

func FuzzAppendCompact(f *testing.F) {
	for _, c := range compactCases {
		if len(c) < 1000 {
			f.Add([]byte(c))
		}
	}
	f.Fuzz(func(t *testing.T, src []byte) { checkCompact(t, src) })
}

// BenchmarkAppendCompact compacts a chat message as atropos groups carry them (a tool
// result of a few KB, already compact) and reports x-vs-encoding-json: json.Compact's
// time over AppendCompact's.
func BenchmarkAppendCompact(b *testing.B) {
	content := strings.Repeat("  File \"solution.py\", line 12, in <module>\n    print(\"ok\")\tdone\n", 60)
	msg, err := json.Marshal(map[string]string{"role": "tool", "tool_call_id": "call_3", "name": "terminal", "content": content})
	if err != nil {
		b.Fatal(err)
	}
	var dst []byte
	var ref bytes.Buffer
	var own, std time.Duration
	for b.Loop() {
		t0 := time.Now()
		for range 10 {
			dst, _ = AppendCompact(dst[:0], msg)
		}
		t1 := time.Now()
		for range 10 {
			ref.Reset()
			_ = json.Compact(&ref, msg)
		}
		own, std = own+t1.Sub(t0), std+time.Since(t1)
	}
	b.SetBytes(int64(20 * len(msg)))
	b.ReportMetric(std.Seconds()/own.Seconds(), "x-vs-encoding-json")
}
