package fakehttp_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentic-opd/agenticopd/internal/fakehttp"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fired sends n requests to path and returns, for each, the Status of the faults that fired.
func fired(r *fakehttp.Faults, path string, n int) [][]int {
	out := make([][]int, n)
	for i := range out {
		for _, f := range r.Trigger(path) {
			out[i] = append(out[i], f.Status)
		}
	}
	return out
}

func TestFaultsTrigger(t *testing.T) {
	tests := []struct {
		name   string
		faults []fakehttp.Fault
		path   string
		n      int
		want   [][]int
	}{
		{"none installed", nil, "/a", 2, [][]int{nil, nil}},
		{"every request", []fakehttp.Fault{{Status: 500}}, "/a", 2, [][]int{{500}, {500}}},
		{"path matches", []fakehttp.Fault{{Path: "/a", Status: 500}}, "/a", 1, [][]int{{500}}},
		{"other path", []fakehttp.Fault{{Path: "/b", Status: 500}}, "/a", 2, [][]int{nil, nil}},
		{"times", []fakehttp.Fault{{Times: 2, Status: 503}}, "/a", 3, [][]int{{503}, {503}, nil}},
		{"every third", []fakehttp.Fault{{Every: 3, Status: 502}}, "/a", 6, [][]int{nil, nil, {502}, nil, nil, {502}}},
		{"every one", []fakehttp.Fault{{Every: 1, Status: 502}}, "/a", 2, [][]int{{502}, {502}}},
		{"every second, once", []fakehttp.Fault{{Every: 2, Times: 1, Status: 502}}, "/a", 4, [][]int{nil, {502}, nil, nil}},
		{
			"install order", []fakehttp.Fault{{Status: 501}, {Times: 1, Status: 502}, {Status: 503}},
			"/a", 2, [][]int{{501, 502, 503}, {501, 503}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r fakehttp.Faults
			for _, f := range tt.faults {
				r.Add(f)
			}
			if diff := cmp.Diff(tt.want, fired(&r, tt.path, tt.n)); diff != "" {
				t.Errorf("fired (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFaultsTriggerReturnsFields(t *testing.T) {
	var r fakehttp.Faults
	f := fakehttp.Fault{Path: "/a", Delay: time.Second, Drop: true, Malformed: true, Status: 418, Body: "x"}
	r.Add(f)
	if diff := cmp.Diff([]fakehttp.Fault{f}, r.Trigger("/a")); diff != "" {
		t.Errorf("Trigger (-want +got):\n%s", diff)
	}
}

func TestFaultsRemoveAndClear(t *testing.T) {
	var r fakehttp.Faults
	removeA := r.Add(fakehttp.Fault{Status: 501})
	r.Add(fakehttp.Fault{Status: 502})
	removeA()
	removeA() // a second call does nothing
	require.Equal(t, [][]int{{502}}, fired(&r, "/", 1))
	r.Clear()
	require.Equal(t, [][]int{nil}, fired(&r, "/", 1))
	removeA() // after Clear, still nothing
	r.Add(fakehttp.Fault{Status: 503})
	require.Equal(t, [][]int{{503}}, fired(&r, "/", 1))
}

func TestFaultsConcurrent(t *testing.T) {
	var r fakehttp.Faults
	r.Add(fakehttp.Fault{Times: 50, Status: 500})
	done := make(chan int)
	for range 4 {
		go func() {
			n := 0
			for range 100 {
				n += len(r.Trigger("/"))
			}
			done <- n
		}()
	}
	total := 0
	for range 4 {
		total += <-done
	}
	require.Equal(t, 50, total, "Times bounds the firings across goroutines")
}

func TestWait(t *testing.T) {
	require.True(t, fakehttp.Wait(context.Background(), time.Millisecond), "a short wait passes")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.False(t, fakehttp.Wait(ctx, time.Hour), "an ended context cuts the wait")
	require.True(t, fakehttp.Wait(ctx, 0), "no wait passes even with an ended context")
	require.True(t, fakehttp.Wait(ctx, -time.Second), "a negative wait is none")
}

func TestDrop(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fakehttp.Drop(w)
	}))
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("got status %d, want a network error", resp.StatusCode)
	}
}

// noHijack is a ResponseWriter that cannot be hijacked.
type noHijack struct{ http.ResponseWriter }

func TestDropWithoutHijackerAborts(t *testing.T) {
	rec := httptest.NewRecorder()
	require.PanicsWithValue(t, http.ErrAbortHandler, func() { fakehttp.Drop(noHijack{rec}) })
}

func TestWriteJSON(t *testing.T) {
	rec := httptest.NewRecorder()
	fakehttp.WriteJSON(rec, http.StatusTeapot, []byte(`{"trunc`))
	res := rec.Result()
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	got := []string{res.Header.Get("Content-Type"), string(body)}
	if diff := cmp.Diff([]string{"application/json", `{"trunc`}, got); diff != "" {
		t.Errorf("answer (-want +got):\n%s", diff)
	}
	require.Equal(t, http.StatusTeapot, res.StatusCode)
}
