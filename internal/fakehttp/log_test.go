package fakehttp_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/internal/fakehttp"
)

type rec struct {
	Path   string
	Status int
}

func TestLog(t *testing.T) {
	var l fakehttp.Log[rec]
	require.Nil(t, l.All(), "an empty log lists nil")
	require.Zero(t, l.Count(""))

	a := l.Add("/a", rec{Path: "/a"})
	l.Add("/b", rec{Path: "/b"})
	l.Add("/a", rec{Path: "/a"})
	l.Update(a, func(r *rec) { r.Status = 200 })

	want := []rec{{"/a", 200}, {"/b", 0}, {"/a", 0}}
	if diff := cmp.Diff(want, l.All()); diff != "" {
		t.Errorf("All (-want +got):\n%s", diff)
	}
	counts := map[string]int{"": l.Count(""), "/a": l.Count("/a"), "/b": l.Count("/b"), "/c": l.Count("/c")}
	if diff := cmp.Diff(map[string]int{"": 3, "/a": 2, "/b": 1, "/c": 0}, counts); diff != "" {
		t.Errorf("Count (-want +got):\n%s", diff)
	}

	got := l.All()
	got[0].Status = 999
	require.Equal(t, 200, l.All()[0].Status, "All returns a copy")
}

func TestLogResetDetachesEntries(t *testing.T) {
	var l fakehttp.Log[rec]
	old := l.Add("/a", rec{Path: "/a"})
	l.Reset()
	require.Nil(t, l.All())
	fresh := l.Add("/b", rec{Path: "/b"})
	l.Update(old, func(r *rec) { r.Status = 500 })
	l.Update(fresh, func(r *rec) { r.Status = 200 })
	if diff := cmp.Diff([]rec{{"/b", 200}}, l.All()); diff != "" {
		t.Errorf("an update to a dropped entry reached the log (-want +got):\n%s", diff)
	}
}

func TestLogConcurrent(t *testing.T) {
	var l fakehttp.Log[rec]
	done := make(chan struct{})
	for range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for range 100 {
				e := l.Add("/a", rec{Path: "/a"})
				l.Update(e, func(r *rec) { r.Status = 200 })
				_ = l.Count("/a")
			}
		}()
	}
	for range 4 {
		<-done
	}
	require.Equal(t, 400, l.Count("/a"))
}
