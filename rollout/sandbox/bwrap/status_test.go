package bwrap

import (
	"bytes"
	"testing"
)

// FuzzReadStatus feeds arbitrary bytes to the parser of bwrap's --json-status-fd
// stream: it must not panic, and it reports that the command ran only when an
// exit-code record was decoded.
func FuzzReadStatus(f *testing.F) {
	f.Add([]byte(`{ "child-pid": 1, "pid-namespace": 4026532181 }` + "\n" + `{ "exit-code": 3 }` + "\n"))
	f.Add([]byte(`{ "child-pid": 22559 }`))
	f.Add([]byte(`{ "exit-code": "x" }`))
	f.Add([]byte(`{"child-pid": -1}{"exit-code": 0}`))
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, data []byte) {
		st := readStatus(bytes.NewReader(data), -1)
		if st.pidfd >= 0 {
			t.Fatalf("a pidfd for a process that is not bwrap's child: %q", data)
		}
		if st.ran && !bytes.Contains(data, []byte(`"exit-code"`)) && !bytes.Contains(data, []byte(`\u`)) {
			t.Fatalf("ran without an exit-code record: %q", data)
		}
	})
}

func TestReadStatus(t *testing.T) {
	for _, c := range []struct {
		name string
		in   string
		ran  bool
	}{
		{"exited", `{ "child-pid": 1 }` + "\n" + `{ "exit-code": 0 }`, true},
		{"setup failed", `{ "child-pid": 1 }`, false},
		{"nothing", ``, false},
		{"exit code not a number", `{ "child-pid": 1 }{ "exit-code": "0" }`, false},
		{"key case matters", `{ "Exit-Code": 0 }`, false},
		{"garbage after start", `{ "child-pid": 1 } nonsense { "exit-code": 0 }`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := readStatus(bytes.NewReader([]byte(c.in)), -1).ran; got != c.ran {
				t.Errorf("ran = %v, want %v", got, c.ran)
			}
		})
	}
}
