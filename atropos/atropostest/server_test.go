package atropostest_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/atropos/atropostest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

type resp struct {
	status int
	body   string
	header http.Header
}

// do sends one raw request; hdr holds header pairs.
func do(t *testing.T, srv *atropostest.Server, method, path, body string, hdr ...string) resp {
	t.Helper()
	tr := &http.Transport{DisableCompression: true}
	defer tr.CloseIdleConnections()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, srv.URL()+path, rd)
	require.NoError(t, err)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	r, err := (&http.Client{Transport: tr}).Do(req)
	require.NoError(t, err)
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	require.NoError(t, err)
	return resp{r.StatusCode, string(b), r.Header}
}

func jsonEq(t *testing.T, want, got string) {
	t.Helper()
	var w, g any
	require.NoError(t, json.Unmarshal([]byte(want), &w), want)
	require.NoError(t, json.Unmarshal([]byte(got), &g), got)
	if diff := cmp.Diff(w, g); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

const registerBody = `{"wandb_group":"g","wandb_project":"p","batch_size":8,"max_token_len":100,"checkpoint_dir":"c","save_checkpoint_interval":5,"starting_step":0,"num_steps":10}`

// groupJSON returns a group of n sequences posted by env (nil for none).
func groupJSON(n int, env any, score float64) string {
	toks := strings.TrimSuffix(strings.Repeat("[1,2],", n), ",")
	scores := strings.TrimSuffix(strings.Repeat(fmt.Sprintf("%v,", score), n), ",")
	e, _ := json.Marshal(env)
	return fmt.Sprintf(`{"tokens":[%s],"masks":[%s],"scores":[%s],"env_id":%s}`, toks, toks, scores, e)
}

func registerEnv(t *testing.T, srv *atropostest.Server, name string, gs int, extra string) int {
	t.Helper()
	r := do(t, srv, "POST", "/register-env", fmt.Sprintf(`{"max_token_length":2048,"desired_name":%q,"weight":1,"group_size":%d%s}`, name, gs, extra))
	require.Equal(t, 200, r.status, r.body)
	var rep struct {
		Status string `json:"status"`
		EnvID  int    `json:"env_id"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.body), &rep))
	require.Equal(t, "success", rep.Status, r.body)
	return rep.EnvID
}

func started(t *testing.T, batchSize int) *atropostest.Server {
	return atropostest.NewServer(t, atropostest.WithTrainer(atropos.TrainerRegistration{BatchSize: batchSize, MaxTokenLen: 100, NumSteps: 10}))
}

func TestRegistrationOrder(t *testing.T) {
	srv := atropostest.NewServer(t)
	jsonEq(t, `{"message":"AtroposLib API"}`, do(t, srv, "GET", "/", "").body)
	jsonEq(t, `{"batch_size":-1,"max_token_len":-1}`, do(t, srv, "GET", "/info", "").body)
	jsonEq(t, `{"status":"error","message":"Trainer not registered. Call /register first.","batch":[]}`, do(t, srv, "GET", "/batch", "").body)
	jsonEq(t, `{"current_step":0,"queue_size":0}`, do(t, srv, "GET", "/status", "").body)
	jsonEq(t, `{"group":null,"project":null}`, do(t, srv, "GET", "/wandb_info", "").body)

	r := do(t, srv, "POST", "/register", registerBody)
	require.Equal(t, 200, r.status)
	require.Regexp(t, `^\{"uuid":[0-9]+\}$`, r.body)
	jsonEq(t, `{"batch_size":8,"max_token_len":100}`, do(t, srv, "GET", "/info", "").body)
	jsonEq(t, `{"group":"g","project":"p"}`, do(t, srv, "GET", "/wandb_info", "").body)

	env := `{"max_token_length":2048,"desired_name":"e","weight":1.0,"group_size":2}`
	jsonEq(t, `{"status":"wait for trainer to start"}`, do(t, srv, "POST", "/register-env", env).body)
	jsonEq(t, `{"batch":null}`, do(t, srv, "GET", "/batch", "").body)
	jsonEq(t, `{"status":"success","env_id":0,"wandb_name":"e_0","checkpoint_dir":"c","starting_step":0,"checkpoint_interval":5,"num_steps":10}`,
		do(t, srv, "POST", "/register-env", env).body)
	jsonEq(t, `{"status":"success","env_id":1,"wandb_name":"e_1","checkpoint_dir":"c","starting_step":0,"checkpoint_interval":5,"num_steps":10}`,
		do(t, srv, "POST", "/register-env", env).body)

	// A second /register does not reconfigure.
	require.Equal(t, 200, do(t, srv, "POST", "/register", strings.Replace(registerBody, `"batch_size":8`, `"batch_size":64`, 1)).status)
	jsonEq(t, `{"batch_size":8,"max_token_len":100}`, do(t, srv, "GET", "/info", "").body)

	jsonEq(t, `{"status":"success"}`, do(t, srv, "POST", "/disconnect-env", `{"env_id":1}`).body)
	require.False(t, srv.Envs()[1].Connected)
	jsonEq(t, `{"status":"failure","error":"list index out of range"}`, do(t, srv, "POST", "/disconnect-env", `{"env_id":7}`).body)
}

func TestRegistrationSchemaErrors(t *testing.T) {
	srv := started(t, 8)
	tests := []struct{ name, path, body, field string }{
		{"register missing field", "/register", `{"batch_size":8}`, "wandb_group"},
		{"env without name", "/register-env", `{"max_token_length":1,"desired_name":null,"weight":1,"group_size":2}`, "desired_name"},
		{"env without weight", "/register-env", `{"max_token_length":1,"desired_name":"x","weight":null,"group_size":2}`, "weight"},
		{"empty body", "/register-env", ``, "body"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := do(t, srv, "POST", tc.path, tc.body)
			require.Equal(t, 422, r.status)
			require.Contains(t, r.body, tc.field)
		})
	}
}

func TestWedgeWhenDataArrivesFirst(t *testing.T) {
	srv := atropostest.NewServer(t)
	jsonEq(t, `{"status":"received"}`, do(t, srv, "POST", "/scored_data", groupJSON(2, nil, 1)).body)
	require.Equal(t, 200, do(t, srv, "POST", "/register", registerBody).status)
	// The register was a no-op: the server is wedged.
	jsonEq(t, `{"batch_size":-1,"max_token_len":-1}`, do(t, srv, "GET", "/info", "").body)
	jsonEq(t, `{"status":"error","message":"Trainer not registered. Call /register first.","batch":[]}`, do(t, srv, "GET", "/batch", "").body)
	jsonEq(t, `{"status":"wait for trainer to start"}`, do(t, srv, "POST", "/register-env", `{"max_token_length":1,"desired_name":"x","weight":1,"group_size":2}`).body)

	// Reset, then register: unwedged.
	r := do(t, srv, "GET", "/reset_data", "")
	require.Equal(t, "Reset successful", r.body)
	require.Equal(t, 500, do(t, srv, "GET", "/batch", "").status, "after a reset /batch fails until /register")
	require.Equal(t, 200, do(t, srv, "POST", "/register", registerBody).status)
	jsonEq(t, `{"batch_size":8,"max_token_len":100}`, do(t, srv, "GET", "/info", "").body)
}

func TestResetKeepsMaxTokenLen(t *testing.T) {
	srv := started(t, 8)
	registerEnv(t, srv, "e", 2, "")
	srv.Reset()
	jsonEq(t, `{"batch_size":-1,"max_token_len":100}`, do(t, srv, "GET", "/info", "").body)
	require.Empty(t, srv.Envs())
	require.Equal(t, 500, do(t, srv, "GET", "/status-env", `{"env_id":0}`).status)
}

func TestStatusEnvTransport(t *testing.T) {
	srv := started(t, 8)
	id := registerEnv(t, srv, "e", 2, "")
	require.Equal(t, 200, do(t, srv, "GET", "/status-env", fmt.Sprintf(`{"env_id":%d}`, id)).status)
	require.Equal(t, 422, do(t, srv, "GET", "/status-env?env_id=0", "").status, "a query string alone is not enough")
	require.Equal(t, 405, do(t, srv, "POST", "/status-env", `{"env_id":0}`).status)
	require.Equal(t, 500, do(t, srv, "GET", "/status-env", `{"env_id":3}`).status)
	require.Equal(t, 404, do(t, srv, "GET", "/nope", "").status)
}

func TestStatusEnvFormulas(t *testing.T) {
	srv := started(t, 16)
	a := registerEnv(t, srv, "a", 2, "")
	r := do(t, srv, "POST", "/register-env", `{"max_token_length":4096,"desired_name":"b","weight":1,"group_size":4,"min_batch_allocation":0.25}`)
	require.Equal(t, 200, r.status)
	b := 1
	for range 3 {
		jsonEq(t, `{"status":"received"}`, do(t, srv, "POST", "/scored_data", groupJSON(2, a, 1)).body)
	}
	for range 2 {
		jsonEq(t, `{"status":"received"}`, do(t, srv, "POST", "/scored_data", groupJSON(4, b, 1)).body)
	}
	// a: weight 2048/(2048+4096); queue (6 + (8 − int(16×0.25))) // 2; self 6 // 2.
	jsonEq(t, `{"current_step":0,"queue_size":5,"unallocated_fraction":0.75,"self_queue_size":3,"max_group_size":4,"env_weight":0.3333333333333333}`,
		do(t, srv, "GET", "/status-env", fmt.Sprintf(`{"env_id":%d}`, a)).body)
	// b: queue (8 + ceil(6/4)×4) // 4; self 8 // 4.
	jsonEq(t, `{"current_step":0,"queue_size":4,"unallocated_fraction":0.75,"self_queue_size":2,"max_group_size":4,"env_weight":0.6666666666666666}`,
		do(t, srv, "GET", "/status-env", fmt.Sprintf(`{"env_id":%d}`, b)).body)

	// No connected env with a positive weight: upstream divides by zero.
	for _, id := range []int{a, b} {
		jsonEq(t, `{"status":"success"}`, do(t, srv, "POST", "/disconnect-env", fmt.Sprintf(`{"env_id":%d}`, id)).body)
	}
	require.Equal(t, 500, do(t, srv, "GET", "/status-env", `{"env_id":0}`).status)
}

func TestBuffering(t *testing.T) {
	srv := started(t, 8)
	id := registerEnv(t, srv, "e", 4, "")
	jsonEq(t, `{"status":"buffered","buffer_size":3}`, do(t, srv, "POST", "/scored_data", groupJSON(3, id, 1)).body)
	jsonEq(t, `{"status":"buffered","buffer_size":5}`, do(t, srv, "POST", "/scored_data", groupJSON(2, id, 2)).body)
	require.Empty(t, srv.Queue())
	// 3+2 and 3+2+2 miss 4; the search finds 2+2.
	jsonEq(t, `{"status":"buffered","buffer_size":3}`, do(t, srv, "POST", "/scored_data", groupJSON(2, id, 3)).body)
	q := srv.Queue()
	require.Len(t, q, 2, "released individually, not merged")
	require.Equal(t, []float64{2, 2}, q[0].Scores)
	require.Equal(t, []float64{3, 3}, q[1].Scores)
	jsonEq(t, `{"status":"buffered","buffer_size":0}`, do(t, srv, "POST", "/scored_data", groupJSON(1, id, 4)).body)
	require.Len(t, srv.Queue(), 4)

	// Unknown env ids and matching sizes go straight to the queue; lists report buffering.
	jsonEq(t, `{"status":"received"}`, do(t, srv, "POST", "/scored_data", groupJSON(3, 9, 5)).body)
	jsonEq(t, `{"status":"received","groups_processed":3,"buffered":2,"last_buffer_size":3}`,
		do(t, srv, "POST", "/scored_data_list", "["+groupJSON(4, id, 6)+","+groupJSON(1, id, 7)+","+groupJSON(2, id, 8)+"]").body)
	jsonEq(t, `{"status":"received","groups_processed":1}`, do(t, srv, "POST", "/scored_data_list", "["+groupJSON(4, id, 9)+"]").body)
}

func TestExactSumBatches(t *testing.T) {
	srv := started(t, 8)
	for i, n := range []int{4, 2, 4, 2, 2} {
		require.Equal(t, 200, do(t, srv, "POST", "/scored_data", groupJSON(n, nil, float64(i))).status)
	}
	// Largest size 4: packs are [g0], [g2], [g1 g3]; the batch takes g0 and g2.
	tr, err := atropos.NewTrainer(srv.URL())
	require.NoError(t, err)
	b, err := tr.Batch(context.Background())
	require.NoError(t, err)
	require.Equal(t, [][]float64{{0, 0, 0, 0}, {2, 2, 2, 2}}, [][]float64{b[0].Scores, b[1].Scores})
	require.Equal(t, 1, srv.Step())
	// Left: three groups of 2 = 6 < 8.
	jsonEq(t, `{"batch":null}`, do(t, srv, "GET", "/batch", "").body)
	require.Equal(t, 1, srv.Step())
	require.Equal(t, 200, do(t, srv, "POST", "/scored_data", groupJSON(2, nil, 5)).status)
	b, err = tr.Batch(context.Background())
	require.NoError(t, err)
	require.Equal(t, 8, atropos.Sequences(b...))
	http.DefaultClient.CloseIdleConnections()
}

func TestBatchNeverFormsWhenSizesDoNotFit(t *testing.T) {
	srv := started(t, 6)
	for range 4 {
		require.Equal(t, 200, do(t, srv, "POST", "/scored_data", groupJSON(4, nil, 1)).status)
	}
	jsonEq(t, `{"batch":null}`, do(t, srv, "GET", "/batch", "").body)
	require.Len(t, srv.Queue(), 4, "an overshoot leaves the queue intact")
}

func TestMinimumAllocation(t *testing.T) {
	srv := started(t, 8)
	a := registerEnv(t, srv, "a", 2, `,"min_batch_allocation":0.5`)
	b := registerEnv(t, srv, "b", 2, "")
	for i := range 4 {
		require.Equal(t, 200, do(t, srv, "POST", "/scored_data", groupJSON(2, b, float64(10+i))).status)
	}
	jsonEq(t, `{"batch":null}`, do(t, srv, "GET", "/batch", "").body) // a reserved half and has nothing
	for i := range 2 {
		require.Equal(t, 200, do(t, srv, "POST", "/scored_data", groupJSON(2, a, float64(i))).status)
	}
	r := do(t, srv, "GET", "/batch", "")
	var got struct{ Batch []atropos.ScoredDataGroup }
	require.NoError(t, json.Unmarshal([]byte(r.body), &got))
	var scores []float64
	for _, g := range got.Batch {
		scores = append(scores, g.Scores[0])
	}
	require.Equal(t, []float64{0, 1, 10, 11}, scores, "a's minimum first, then the queue in order")

	// Once a disconnects, batches form without it.
	jsonEq(t, `{"status":"success"}`, do(t, srv, "POST", "/disconnect-env", fmt.Sprintf(`{"env_id":%d}`, a)).body)
	for i := range 2 {
		require.Equal(t, 200, do(t, srv, "POST", "/scored_data", groupJSON(2, b, float64(20+i))).status)
	}
	require.Contains(t, do(t, srv, "GET", "/batch", "").body, `"scores":[12,12]`)
}

func TestGzipBodies(t *testing.T) {
	srv := started(t, 8)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write([]byte(groupJSON(2, nil, 1)))
	require.NoError(t, zw.Close())
	r := do(t, srv, "POST", "/scored_data", buf.String(), "Content-Encoding", "GZIP")
	jsonEq(t, `{"status":"received"}`, r.body)
	require.True(t, srv.Requests()[0].Gzip)

	r = do(t, srv, "POST", "/scored_data", "", "Content-Encoding", "gzip")
	require.Equal(t, 422, r.status, "an empty gzip body is an empty body")

	r = do(t, srv, "POST", "/scored_data", "not gzip", "Content-Encoding", "gzip")
	require.Equal(t, 400, r.status)
	require.Equal(t, "Invalid gzip payload", r.body)
	require.Contains(t, r.header.Get("Content-Type"), "text/plain")

	// Replies from 1000 bytes are gzipped for clients that accept it.
	for range 3 {
		require.Equal(t, 200, do(t, srv, "POST", "/scored_data", groupJSON(2, nil, 1)).status)
	}
	r = do(t, srv, "GET", "/batch", "", "Accept-Encoding", "gzip")
	require.Equal(t, "gzip", r.header.Get("Content-Encoding"))
	r = do(t, srv, "GET", "/latest_example", "", "Accept-Encoding", "gzip")
	require.Empty(t, r.header.Get("Content-Encoding"), "small replies are not gzipped")
}

func TestGroupSchemaErrors(t *testing.T) {
	srv := started(t, 8)
	for _, msg := range []string{`{"role":"user"}`, `{"content":"x"}`} {
		body := `{"tokens":[[1]],"masks":[[1]],"scores":[1],"messages":[[` + msg + `]]}`
		r := do(t, srv, "POST", "/scored_data", body)
		require.Equal(t, 422, r.status)
		require.Contains(t, r.body, "Message must have 'role' and 'content' fields")
		r = do(t, srv, "POST", "/scored_data_list", "["+body+"]")
		require.Equal(t, 422, r.status)
	}
	r := do(t, srv, "POST", "/scored_data", `{"tokens":[[1]],"masks":[[1]],"scores":[1],"overrides":[null]}`)
	require.Equal(t, 422, r.status, "a null overrides entry is not a dict")
	require.Contains(t, r.body, "valid dictionary")
	require.Empty(t, srv.Received())
	r = do(t, srv, "POST", "/scored_data", `{"tokens":[[1]],"masks":[[1]]}`)
	require.Equal(t, 422, r.status)
	require.Contains(t, r.body, "scores")
}

func TestLatestExampleAndAllKeys(t *testing.T) {
	srv := started(t, 8)
	jsonEq(t, `{"tokens":[],"masks":[],"scores":[],"advantages":[],"ref_logprobs":[],"generation_params":[],"inference_logprobs":[],"messages":[],"images":[]}`,
		do(t, srv, "GET", "/latest_example", "").body)
	require.Equal(t, 200, do(t, srv, "POST", "/scored_data", `{"tokens":[[1]],"masks":[[1]],"scores":[1],"unknown":5}`).status)
	jsonEq(t, `{"tokens":[[1]],"masks":[[1]],"scores":[1],"advantages":null,"ref_logprobs":null,"messages":null,"generation_params":null,"inference_logprobs":null,"overrides":null,"group_overrides":null,"images":null,"env_id":null,"distill_token_ids":null,"distill_logprobs":null}`,
		do(t, srv, "GET", "/latest_example", "").body)
}

func TestFaultInjection(t *testing.T) {
	srv := started(t, 8)
	srv.FailNext("/info", 2, 503, "")
	require.Equal(t, 503, do(t, srv, "GET", "/info", "").status)
	require.Equal(t, 503, do(t, srv, "GET", "/info", "").status)
	require.Equal(t, 200, do(t, srv, "GET", "/info", "").status)
	require.Equal(t, 3, srv.RequestCount("/info"))

	srv.SetError("", 500, `{"detail":"boom"}`)
	r := do(t, srv, "GET", "/status", "")
	require.Equal(t, 500, r.status)
	require.Equal(t, `{"detail":"boom"}`, r.body)
	srv.ClearFaults()
	require.Equal(t, 200, do(t, srv, "GET", "/status", "").status)

	remove := srv.AddFault(atropostest.Fault{Path: "/status", Every: 2, Status: 502})
	var got []int
	for range 4 {
		got = append(got, do(t, srv, "GET", "/status", "").status)
	}
	require.Equal(t, []int{200, 502, 200, 502}, got)
	remove()
	require.Equal(t, 200, do(t, srv, "GET", "/status", "").status)

	srv.AddFault(atropostest.Fault{Path: "/info", Times: 1, Malformed: true})
	r = do(t, srv, "GET", "/info", "")
	require.Equal(t, 200, r.status)
	require.False(t, json.Valid([]byte(r.body)))

	srv.AddFault(atropostest.Fault{Path: "/info", Times: 1, Delay: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", srv.URL()+"/info", nil)
	require.NoError(t, err)
	tr0 := &http.Transport{}
	defer tr0.CloseIdleConnections()
	_, err = (&http.Client{Transport: tr0}).Do(req)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	srv.AddFault(atropostest.Fault{Times: 1, Drop: true})
	tr1 := &http.Transport{}
	defer tr1.CloseIdleConnections()
	_, err = (&http.Client{Transport: tr1}).Get(srv.URL() + "/info")
	require.Error(t, err, "a dropped connection")
	require.Eventually(t, func() bool {
		reqs := srv.Requests()
		return reqs[len(reqs)-1].Fault && reqs[len(reqs)-1].Status == 0
	}, 5*time.Second, time.Millisecond)

	srv.SetDown(true)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	_, err = (&http.Client{Transport: tr}).Get(srv.URL() + "/info")
	require.Error(t, err, "a down server drops the connection")
	srv.SetDown(false)
	require.Equal(t, 200, do(t, srv, "GET", "/info", "").status)
}

func TestStartAndClose(t *testing.T) {
	srv, err := atropostest.Start()
	require.NoError(t, err)
	require.Equal(t, 200, do(t, srv, "GET", "/", "").status)
	srv.Close()
	srv.Close() // idempotent
	_, err = http.Get(srv.URL() + "/")
	require.Error(t, err)
}

// TestBufferSearchTakesNewerGroups follows upstream's subset search when FIFO fails: its
// walk back from the newest group takes the later of two equal choices.
func TestBufferSearchTakesNewerGroups(t *testing.T) {
	srv := started(t, 8)
	id := registerEnv(t, srv, "e", 8, "")
	for i, n := range []int{7, 5, 5} {
		r := do(t, srv, "POST", "/scored_data", groupJSON(n, id, float64(i)))
		require.Contains(t, r.body, `"buffered"`)
	}
	require.Empty(t, srv.Queue())
	// FIFO takes 7 and then nothing fits; 5+3 can use either 5: upstream takes the second.
	jsonEq(t, `{"status":"buffered","buffer_size":12}`, do(t, srv, "POST", "/scored_data", groupJSON(3, id, 3)).body)
	var got []float64
	for _, g := range srv.Queue() {
		got = append(got, g.Scores[0])
	}
	require.Equal(t, []float64{2, 3}, got)
}

// TestStatusEnvCountsEveryOtherGroup: groups without an env id count as another env's
// data, and a disconnected env's minimum is no longer reserved.
func TestStatusEnvCountsEveryOtherGroup(t *testing.T) {
	srv := started(t, 16)
	a := registerEnv(t, srv, "a", 2, "")
	b := registerEnv(t, srv, "b", 4, `,"min_batch_allocation":0.25`)
	jsonEq(t, `{"status":"received"}`, do(t, srv, "POST", "/scored_data", groupJSON(2, a, 1)).body)
	for range 2 {
		jsonEq(t, `{"status":"received"}`, do(t, srv, "POST", "/scored_data", groupJSON(4, nil, 1)).body)
		jsonEq(t, `{"status":"received"}`, do(t, srv, "POST", "/scored_data", groupJSON(4, b, 1)).body)
	}
	// a: (2 + ceil(8/4)×4 for the groups without env + (ceil(8/4)×4 − int(16×0.25)) for b) // 2.
	status := func() string { return do(t, srv, "GET", "/status-env", fmt.Sprintf(`{"env_id":%d}`, a)).body }
	jsonEq(t, `{"current_step":0,"queue_size":7,"unallocated_fraction":0.75,"self_queue_size":1,"max_group_size":4,"env_weight":0.5}`, status())
	jsonEq(t, `{"status":"success"}`, do(t, srv, "POST", "/disconnect-env", fmt.Sprintf(`{"env_id":%d}`, b)).body)
	// b's 8 sequences now all count: (2 + 8 + 8) // 2.
	jsonEq(t, `{"current_step":0,"queue_size":9,"unallocated_fraction":1,"self_queue_size":1,"max_group_size":4,"env_weight":1}`, status())
}

// TestMinimumAllocationSkipsWhatDoesNotFit: the first pass passes over a reserved env's
// group that would overshoot the batch and takes a later one that fits, as upstream.
func TestMinimumAllocationSkipsWhatDoesNotFit(t *testing.T) {
	srv := started(t, 16)
	a := registerEnv(t, srv, "a", 4, `,"min_batch_allocation":0.75`)
	b := registerEnv(t, srv, "b", 8, `,"min_batch_allocation":0.25`)
	post := func(n, env int, score float64) {
		require.Equal(t, 200, do(t, srv, "POST", "/scored_data", groupJSON(n, env, score)).status)
	}
	post(8, b, 10)
	for i := range 4 {
		post(4, a, float64(1+i))
	}
	post(4, b, 11) // b registered 8: buffered until another 4 completes it
	post(4, b, 12)
	require.Len(t, srv.Queue(), 7)
	// a's minimum 12 takes three of its 4s; b's minimum 4 skips its 8 (12+8 > 16) and
	// takes its first 4.
	tr, err := atropos.NewTrainer(srv.URL())
	require.NoError(t, err)
	defer http.DefaultClient.CloseIdleConnections()
	batch, err := tr.Batch(context.Background())
	require.NoError(t, err)
	var got []float64
	for _, g := range batch {
		got = append(got, g.Scores[0])
	}
	require.Equal(t, []float64{1, 2, 3, 11}, got)
}

// TestMinimumAllocationsScaledDown: minimums summing past the batch size shrink in
// proportion, so each reserved env still gets its share.
func TestMinimumAllocationsScaledDown(t *testing.T) {
	srv := started(t, 8)
	a := registerEnv(t, srv, "a", 4, `,"min_batch_allocation":0.75`)
	b := registerEnv(t, srv, "b", 4, `,"min_batch_allocation":0.75`)
	for i := range 2 {
		require.Equal(t, 200, do(t, srv, "POST", "/scored_data", groupJSON(4, a, float64(1+i))).status)
		require.Equal(t, 200, do(t, srv, "POST", "/scored_data", groupJSON(4, b, float64(11+i))).status)
	}
	// 6 + 6 > 8: each minimum becomes max(4, int(6×8/12)) = 4, so every batch is one
	// group of each env. Two batches form; the newer is served first.
	var got struct{ Batch []atropos.ScoredDataGroup }
	require.NoError(t, json.Unmarshal([]byte(do(t, srv, "GET", "/batch", "").body), &got))
	var scores []float64
	for _, g := range got.Batch {
		scores = append(scores, g.Scores[0])
	}
	require.Equal(t, []float64{2, 12}, scores)
	require.Equal(t, 2, srv.Step())
}

// TestResetAsUpstream: /reset_data on a fresh server changes nothing; after a real reset
// a trainer's /batch (500) still opens /register-env, an env may register against the
// stale state, and its data wedges the server again — the hazard of upstream's reset.
func TestResetAsUpstream(t *testing.T) {
	fresh := atropostest.NewServer(t)
	require.Equal(t, "Reset successful", do(t, fresh, "GET", "/reset_data", "").body)
	jsonEq(t, `{"status":"error","message":"Trainer not registered. Call /register first.","batch":[]}`, do(t, fresh, "GET", "/batch", "").body)

	srv := atropostest.NewServer(t)
	require.Equal(t, 200, do(t, srv, "POST", "/register", registerBody).status)
	jsonEq(t, `{"batch":null}`, do(t, srv, "GET", "/batch", "").body)
	srv.Reset()
	require.Equal(t, 500, do(t, srv, "GET", "/batch", "").status)
	// Checkpoint fields survive the reset; num_steps becomes -1.
	jsonEq(t, `{"status":"success","env_id":0,"wandb_name":"e_0","checkpoint_dir":"c","starting_step":0,"checkpoint_interval":5,"num_steps":-1}`,
		do(t, srv, "POST", "/register-env", `{"max_token_length":2048,"desired_name":"e","weight":1,"group_size":2}`).body)
	jsonEq(t, `{"current_step":0,"queue_size":0,"unallocated_fraction":1,"self_queue_size":0,"max_group_size":1,"env_weight":1}`,
		do(t, srv, "GET", "/status-env", `{"env_id":0}`).body)
	jsonEq(t, `{"current_step":0,"queue_size":0}`, do(t, srv, "GET", "/status", "").body)
	jsonEq(t, `{"status":"received"}`, do(t, srv, "POST", "/scored_data", groupJSON(2, 0, 1)).body)
	jsonEq(t, `{"current_step":0,"queue_size":1}`, do(t, srv, "GET", "/status", "").body)
	require.Equal(t, 200, do(t, srv, "POST", "/register", registerBody).status)
	jsonEq(t, `{"batch_size":-1,"max_token_len":100}`, do(t, srv, "GET", "/info", "").body)
	jsonEq(t, `{"batch":null}`, do(t, srv, "GET", "/batch", "").body)
}

// TestRestartLosesEverything: a restarted API holds no trainer, no env and no data,
// hands out env ids from 0 again and wedges on a group posted before /register.
func TestRestartLosesEverything(t *testing.T) {
	srv := started(t, 4)
	require.Equal(t, 0, registerEnv(t, srv, "a", 2, ""))
	require.Equal(t, 1, registerEnv(t, srv, "b", 2, ""))
	jsonEq(t, `{"status":"received"}`, do(t, srv, "POST", "/scored_data", groupJSON(2, 1, 0.5)).body)

	require.NoError(t, srv.Restart())
	require.Equal(t, 1, srv.Restarts())
	jsonEq(t, `{"batch_size":-1,"max_token_len":-1}`, do(t, srv, "GET", "/info", "").body)
	jsonEq(t, `{"status":"wait for trainer to start"}`,
		do(t, srv, "POST", "/register-env", `{"max_token_length":2048,"desired_name":"b","weight":1,"group_size":2}`).body)
	require.Empty(t, srv.Envs())
	require.Empty(t, srv.Queue())
	require.Len(t, srv.Received(), 1, "Received keeps what the killed process got")

	// The trainer again, then its first /batch: env ids start from 0 again.
	require.Equal(t, 200, do(t, srv, "POST", "/register", registerBody).status)
	jsonEq(t, `{"batch":null}`, do(t, srv, "GET", "/batch", "").body)
	require.Equal(t, 0, registerEnv(t, srv, "b", 2, ""))
	require.Equal(t, 500, do(t, srv, "GET", "/status-env", `{"env_id":1}`).status, "the old id 1 is unknown")

	// Restarted once more, a group arrives before the trainer's /register: wedged.
	require.NoError(t, srv.Restart())
	jsonEq(t, `{"status":"received"}`, do(t, srv, "POST", "/scored_data", groupJSON(2, 0, 0.5)).body)
	require.Equal(t, 200, do(t, srv, "POST", "/register", registerBody).status)
	jsonEq(t, `{"batch_size":-1,"max_token_len":-1}`, do(t, srv, "GET", "/info", "").body)
	jsonEq(t, `{"status":"error","message":"Trainer not registered. Call /register first.","batch":[]}`, do(t, srv, "GET", "/batch", "").body)
	require.Equal(t, 500, do(t, srv, "GET", "/status-env", `{"env_id":0}`).status)
	// Only /reset_data clears it.
	require.Equal(t, "Reset successful", do(t, srv, "GET", "/reset_data", "").body)
	require.Equal(t, 200, do(t, srv, "POST", "/register", registerBody).status)
	jsonEq(t, `{"batch_size":8,"max_token_len":100}`, do(t, srv, "GET", "/info", "").body)
}

// TestKillRefusesConnections: while killed, the address refuses connections; Restart
// serves again on the same address.
func TestKillRefusesConnections(t *testing.T) {
	srv := started(t, 4)
	srv.Kill()
	_, err := http.Get(srv.URL() + "/info")
	require.ErrorContains(t, err, "connection refused")
	require.NoError(t, srv.Restart())
	jsonEq(t, `{"batch_size":-1,"max_token_len":-1}`, do(t, srv, "GET", "/info", "").body)
	srv.Close()
	require.Error(t, srv.Restart(), "no restart after Close")
}

// TestHoldNextOutlivesARestart: the answer to a held request is computed by the process
// that took it (its state, before the restart) and arrives after the restart; the next
// request is answered by the restarted process at once.
func TestHoldNextOutlivesARestart(t *testing.T) {
	srv := started(t, 4)
	hold := srv.HoldNext("/info")
	got := make(chan resp, 1)
	go func() { got <- do(t, srv, "GET", "/info", "") }()
	<-hold.Held()
	require.NoError(t, srv.Restart())
	jsonEq(t, `{"batch_size":-1,"max_token_len":-1}`, do(t, srv, "GET", "/info", "").body)
	select {
	case r := <-got:
		t.Fatalf("the held answer arrived before its release: %d %s", r.status, r.body)
	default:
	}
	hold.Release()
	r := <-got
	require.Equal(t, 200, r.status)
	jsonEq(t, `{"batch_size":4,"max_token_len":100}`, r.body)
}

// TestWithAddress: a fake started on a given address, as a test does when it runs the
// fake in a process of its own and starts the next one there.
func TestWithAddress(t *testing.T) {
	first := atropostest.NewServer(t)
	addr := strings.TrimPrefix(first.URL(), "http://")
	first.Close()
	srv, err := atropostest.Start(atropostest.WithAddress(addr))
	require.NoError(t, err)
	defer srv.Close()
	require.Equal(t, "http://"+addr, srv.URL())
	jsonEq(t, `{"batch_size":-1,"max_token_len":-1}`, do(t, srv, "GET", "/info", "").body)
}
