package reward_test

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/reward"
)

func TestCheckReply(t *testing.T) {
	nested := func(n int) string {
		return strings.Repeat(`["l",[`, n) + strings.Repeat(`]]`, n)
	}
	good := []string{
		`{"id":7,"ok":null}`,
		`{"id":7,"ok":true}`,
		`{"ok":["i","0x0"],"id":7}`,
		`{"id":7,"ok":["i","-0x1f"]}`,
		`{"id":7,"ok":["f","0x1.999999999999ap-4"]}`,
		`{"id":7,"ok":["f","nan"]}`,
		`{"id":7,"ok":["f","-inf"]}`,
		`{"id":7,"ok":["f","-0x0.0p+0"]}`,
		`{"id":7,"ok":["s","\u00e9\n"]}`,
		`{"id":7,"ok":["y","00ff"]}`,
		`{"id":7,"ok":["y",""]}`,
		`{"id":7,"ok":["S",[["t",[["i","0x1"],["s","a"]]],["F",[]],["h",3]]]}`,
		`{"id":7,"ok":["d",[[["t",[]],["l",[]]],[null,["d",[]]]]]}`,
		`{"id":7,"ok":["h",0]}`,
		`{"id":7,"exc":["ValueError",["t",[["s","bad"]]]]}`,
		`{"id":7,"ok":` + nested(reward.MaxDepth) + `}`,
		`{"id":7,"ok":null,"out":[[0,["l",[["i","0x1"]]]],["key",["d",[]]]]}`,
		`{"id":7,"exc":["ValueError",["t",[]]],"out":[[2,["S",[]]]]}`,
		`{"id":7,"exc":["ValueError",["t",[]],["x",[3,["x",[2,"ValueError","AccountError"]],"InsufficientFunds"]]]}`,
		`{"id":7,"ok":["x",[4,"KeyError","KeyError"]]}`,
		`{"id":7,"exc":["ValueError",["t",[]],null,[["shortfall",["i","0x5"]],["who",["h",2]]]]}`,
		`{"id":7,"exc":["ValueError",["t",[]],["x",[3,"ValueError","Short"]],[["_n",null]]]}`,
		`{"id":7,"ok":["s","` + strings.Repeat("x", reward.MaxMessage-len(`{"id":7,"ok":["s",""]}`)) + `"]}`,
	}
	for _, line := range good {
		require.NoError(t, reward.CheckReply([]byte(line+"\n"), 7), line)
	}
	bad := map[string]string{
		"not JSON":                    `{"id":7,"ok":`,
		"two values":                  `{"id":7,"ok":null} {}`,
		"another id":                  `{"id":8,"ok":null}`,
		"a string id":                 `{"id":"7","ok":null}`,
		"an extra key":                `{"id":7,"ok":null,"done":true}`,
		"both ok and exc":             `{"id":7,"ok":null,"exc":["ValueError",["t",[]]]}`,
		"neither":                     `{"id":7,"result":null}`,
		"key case":                    `{"ID":7,"ok":null}`,
		"a bare number":               `{"id":7,"ok":15}`,
		"a bare string":               `{"id":7,"ok":"x"}`,
		"a bare list":                 `{"id":7,"ok":[1,2]}`,
		"a bare object":               `{"id":7,"ok":{}}`,
		"an unknown tag":              `{"id":7,"ok":["q","x"]}`,
		"a decimal int":               `{"id":7,"ok":["i","15"]}`,
		"a padded int":                `{"id":7,"ok":["i","0x01"]}`,
		"an upper-case int":           `{"id":7,"ok":["i","0xF"]}`,
		"an int with underscores":     `{"id":7,"ok":["i","0x1_0"]}`,
		"a decimal float":             `{"id":7,"ok":["f","0.1"]}`,
		"odd hex bytes":               `{"id":7,"ok":["y","0"]}`,
		"hex bytes with spaces":       `{"id":7,"ok":["y","00 ff"]}`,
		"a float handle":              `{"id":7,"ok":["h",1.0]}`,
		"a negative handle":           `{"id":7,"ok":["h",-1]}`,
		"a list in a set":             `{"id":7,"ok":["S",[["l",[]]]]}`,
		"a tuple holding a list":      `{"id":7,"ok":["F",[["t",[["l",[]]]]]]}`,
		"a dict key that is a set":    `{"id":7,"ok":["d",[[["S",[]],null]]]}`,
		"a dict item not a pair":      `{"id":7,"ok":["d",[[null]]]}`,
		"too deep":                    `{"id":7,"ok":` + nested(reward.MaxDepth+2) + `}`,
		"an exception not named":      `{"id":7,"exc":["Value Error",["t",[]]]}`,
		"exception args a list":       `{"id":7,"exc":["ValueError",["l",[]]]}`,
		"exception without args":      `{"id":7,"exc":["ValueError"]}`,
		"changes without a value":     `{"id":7,"out":[[0,null]]}`,
		"an exception class a handle": `{"id":7,"exc":["ValueError",["t",[]],["h",3]]}`,
		"an exception class unnamed":  `{"id":7,"ok":["x",[3,"ValueError",""]]}`,
		"an exception class a float":  `{"id":7,"ok":["x",[3.5,"ValueError","E"]]}`,
		"an exception base a handle":  `{"id":7,"ok":["x",[3,["h",2],"E"]]}`,
		"an exception base a number":  `{"id":7,"ok":["x",[3,7,"E"]]}`,
		"changes and an extra key":    `{"id":7,"ok":null,"out":[[0,null]],"done":true}`,
		"no changes in out":           `{"id":7,"ok":null,"out":[]}`,
		"changes not a list":          `{"id":7,"ok":null,"out":{"0":null}}`,
		"a negative position":         `{"id":7,"ok":null,"out":[[-1,null]]}`,
		"a float position":            `{"id":7,"ok":null,"out":[[0.5,null]]}`,
		"a change not a pair":         `{"id":7,"ok":null,"out":[[0]]}`,
		"a changed bare value":        `{"id":7,"ok":null,"out":[[0,[1]]]}`,
		"a key twice":                 `{"id":7,"id":7,"ok":null}`,
		"a comma before the end":      `{"id":7,"ok":null,}`,
		"a comma in a list's end":     `{"id":7,"ok":["l",[null,]]}`,
		"an empty object":             `{}`,
		"white space first":           ` {"id":7,"ok":null}`,
		"a byte that is not ASCII":    `{"id":7,"ok":["s","é"]}`,
		"an escaped tag":              `{"id":7,"ok":["\u0073","x"]}`,
		"-0x0":                        `{"id":7,"ok":["i","-0x0"]}`,
		"a null class, no attributes": `{"id":7,"exc":["ValueError",["t",[]],null]}`,
		"no attributes":               `{"id":7,"exc":["ValueError",["t",[]],null,[]]}`,
		"a dunder attribute":          `{"id":7,"exc":["ValueError",["t",[]],null,[["__class__",null]]]}`,
		"an attribute not a pair":     `{"id":7,"exc":["ValueError",["t",[]],null,[["n"]]]}`,
		"one byte over MaxMessage":    `{"id":7,"ok":["s","` + strings.Repeat("x", reward.MaxMessage+1-len(`{"id":7,"ok":["s",""]}`)) + `"]}`,
	}
	for name, line := range bad {
		require.Error(t, reward.CheckReply([]byte(line+"\n"), 7), name)
	}
}

func FuzzCheckReply(f *testing.F) {
	for _, s := range []string{`{"id":1,"ok":["l",[["i","0x1"]]]}`, `{"id":1,"exc":["KeyError",["t",[]]]}`, `{"id":1,"ok":["d",[[["s","a"],null]]]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		_ = reward.ParseRequest(line) // never panics
		if reward.CheckReply(line, 1) == nil {
			// What the relay accepts is one line of JSON with "id" and "ok" or "exc",
			// and "out" when arguments changed.
			var m map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(line, &m))
			require.Contains(t, []int{2, 3}, len(m))
			require.Contains(t, m, "id")
		}
	})
}

// TestCodecIsStrict runs the harness's decoder on values the relay would refuse too,
// and on the values an encoder builds from every plain type.
func TestCodecIsStrict(t *testing.T) {
	prog := reward.CodecPy + `
import sys
def handle(h):
    return ("handle", h)
bad = [15, "x", [1, 2], ["q", "x"], ["i", "15"], ["i", "0x01"], ["i", " 0x1"], ["i", "0x1_0"], ["i", "+0x1"],
       ["f", "0.1"], ["f", "0x1p0"], ["y", "0"], ["y", "00 ff"], ["y", "FF"], ["h", -1], ["h", 1.0], ["h", True],
       ["S", [["l", []]]], ["d", [[["l", []], None]]], ["d", [[None]]], ["t", "ab"]]
deep = None
for _ in range(MAX_DEPTH + 2):
    deep = ["l", [deep]]
bad.append(deep)
for v in bad:
    try:
        decode(v, handle)
    except BadValue:
        continue
    sys.exit("accepted %r" % (v,))
class I(int):
    pass
class L(list):
    pass
values = [None, True, False, 0, -1, 2 ** 300, -(2 ** 300), 0.1, -0.0, float("inf"), "é\x00", b"\x00\xff", (1, (2,)),
          [1, [2]], {1, (2, 3)}, frozenset({"a"}), {(1, "k"): [None]}]
for v in values:
    w = decode(loads(dumps(encode(v, None))), handle)
    assert w == v and type(w) is type(v), (v, w)
nan = decode(encode(float("nan"), None), handle)
assert nan != nan
kept = []
for v in (I(3), L(), True.__class__, object()):
    assert encode(v, lambda x: kept.append(x) or len(kept)) == ["h", len(kept)], v
assert encode([I(1)], lambda x: 9) == ["l", [["h", 9]]]
print("ok")
`
	out, err := exec.Command("/usr/bin/python3", "-I", "-c", prog).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, "ok\n", string(out))
}

// BenchmarkCheckReply measures the relay's check of the worst reply (MaxMessage bytes
// of Nones) in memory, as throughput (MB/s) and allocations.
func BenchmarkCheckReply(b *testing.B) {
	line := []byte(`{"id":3,"ok":["l",[` + strings.Repeat("null,", worstReply-1) + `null]]}` + "\n")
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		if err := reward.CheckReply(line, 3); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRelayAcceptsWhatTheHarnessWrites encodes random plain values with the harness's
// encoder, as replies, and checks that the relay accepts every one.
func TestRelayAcceptsWhatTheHarnessWrites(t *testing.T) {
	prog := reward.CodecPy + `
import random, sys
rnd = random.Random(19)
def value(d):
    k = rnd.randrange(14 if d < 6 else 8)
    if k == 0: return None
    if k == 1: return rnd.random() < 0.5
    if k == 2: return rnd.randrange(-2 ** 70, 2 ** 70)
    if k == 3: return rnd.choice([0.1, -0.0, float("inf"), float("nan"), 1e300, -5e-324])
    if k == 4: return "".join(chr(rnd.randrange(0, 0x3000)) for _ in range(rnd.randrange(6)))
    if k == 5: return bytes(rnd.randrange(256) for _ in range(rnd.randrange(5)))
    if k == 6: return object()
    if k == 7: return (value(d + 1), rnd.randrange(9))
    if k == 8: return [value(d + 1) for _ in range(rnd.randrange(4))]
    if k == 9: return {rnd.randrange(9): value(d + 1), "k": value(d + 1)}
    if k == 10: return {rnd.randrange(9), (1, "a")}
    if k == 11: return frozenset({rnd.randrange(9)})
    if k == 12: return tuple(value(d + 1) for _ in range(rnd.randrange(4)))
    return ValueError
handles = []
deep = []
for _ in range(MAX_DEPTH + 5):
    deep = [deep]
for i in range(2000):
    v = deep if i == 0 else value(0)
    sys.stdout.buffer.write(dumps({"id": 1, "ok": encode(v, lambda x: handles.append(x) or len(handles))}))
`
	out, err := exec.Command("/usr/bin/python3", "-I", "-c", prog).Output()
	require.NoError(t, err)
	lines := strings.SplitAfter(string(out), "\n")
	require.Len(t, lines, 2001) // and "" after the last newline
	for _, line := range lines[:2000] {
		require.NoError(t, reward.CheckReply([]byte(line), 1), "%.300s", line)
	}
}
