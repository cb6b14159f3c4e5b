// Package atropostest is an in-process fake of the Atropos trajectory API (the FastAPI
// app started by run-api) that speaks the real protocol over loopback HTTP, so that the
// real [atropos.Client] and [atropos.Trainer] are what tests exercise.
//
// Use [NewServer] in tests (it registers cleanup) or [Start] in programs, then point a
// client at [Server.URL]. State is reachable directly ([Server.RegisterTrainer],
// [Server.StartTrainer], [Server.Reset], [Server.Queue], [Server.Received],
// [Server.Served], [Server.Buffered], [Server.Envs], [Server.Step]). Faults are injected
// as in vllmtest ([Server.AddFault] with delays, dropped connections, truncated bodies
// and status codes; [Server.SetError], [Server.FailNext]), plus [Server.SetDown] for an
// API that drops every connection for a while, and [Server.Kill] / [Server.Restart] for
// an API process that is killed (connections refused) and started again with empty
// state, and [Server.HoldNext] for an answer of the old process that reaches the client
// after such a restart. [WithAddress] fixes the address, for a test that runs the fake in
// a process of its own and kills it. Requests are recorded ([Server.Requests],
// [Server.RequestCount]).
//
// # Faithful to upstream
//
//   - Endpoints, request and reply shapes, and status codes: GET /, POST /register,
//     POST /register-env, POST /disconnect-env, GET /wandb_info, GET /info, GET /batch,
//     GET /latest_example, POST /scored_data, POST /scored_data_list, GET /status,
//     GET /status-env (JSON body on a GET; 422 without a body, 500 for an unknown env,
//     405 for other methods), GET /reset_data.
//   - Registration order: /register initialises state only when no queue exists yet;
//     /register-env answers "wait for trainer to start" until the trainer's first
//     /batch; wandb_name is desired_name + "_" + the count of earlier envs with that
//     name; the uuid is a random 128-bit integer.
//   - Restarts: [Server.Restart] loses all in-memory state, as upstream's single process
//     does; /info answers -1 until the trainer registers again, /register-env waits
//     for its first /batch, env ids are handed out from 0 again (an env that keeps its
//     old id may find it is another env's), and the step counter restarts at the
//     trainer's starting_step.
//   - The wedge: data posted before a trainer registered is accepted and creates the
//     queue, after which /register no longer initialises anything; /info stays -1 and
//     /batch keeps answering "Trainer not registered" until /reset_data.
//   - /reset_data: without a queue it changes nothing; otherwise the queue, buffers,
//     envs and formed batches go, batch size and num_steps become -1 and the step 0,
//     while max_token_len, the checkpoint fields and the latest example stay. Until the
//     next /register, /batch answers 500 yet marks the trainer started, so an env can
//     register against the stale state and wedge the server again by posting.
//   - Buffering of groups whose size differs from the env's group size, released to the
//     queue when some buffered groups sum exactly to it (greedy FIFO first, then
//     upstream's subset search, which walks back from the newest group and so takes
//     newer groups first); "buffered" replies with buffer_size.
//   - Batch formation: exact-sum batches from packs of the largest group size, as many
//     batches as possible at once, the step counter moved by that many, batches served
//     newest first; the minimum-allocation variant when any env set
//     min_batch_allocation: per-env packs of the queue's largest group size, starvation
//     while a reserved env has nothing packable, minimums scaled down when they exceed
//     the batch, a first pass that skips groups overshooting the batch.
//   - /status-env formulas (env_weight, unallocated_fraction, max_group_size, the
//     group size written back, self_queue_size, queue_size, where groups without an
//     env id count as another env's and only connected envs reserve a minimum).
//   - gzip request bodies (400 "Invalid gzip payload" when undecodable) and gzip
//     replies from 1000 bytes when the client accepts them.
//   - 422 "Message must have 'role' and 'content' fields" for such a message, and 422
//     for a null overrides entry; every stored group re-emitted with all 14 keys.
//
// # Simplified
//
//   - Groups are decoded by [atropos.ScoredDataGroup.UnmarshalJSON], which is stricter
//     than pydantic's lax mode: numeric strings in integer fields, NaN and Infinity, and
//     distill arrays whose ids and logprobs differ in shape get 422 instead of being
//     accepted (upstream would then fail a /batch with 500 for NaN).
//   - 422 bodies carry one FastAPI-style detail entry, not pydantic's full list.
//   - Negative env ids, which Python would index from the end of the env list, are
//     treated as unknown ids.
//   - No CORS headers, no wandb, nothing persisted.
package atropostest
