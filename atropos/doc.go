// Package atropos speaks the Atropos trajectory API (NousResearch's run-api, port 8000):
// the scored-group data model, the env side that registers and sends groups, the
// trainer side that pulls batches, and the JSON Lines files of BaseEnv's process mode.
//
// # Groups
//
// [ScoredDataGroup] has the 14 keys of the API's ScoredData with their exact JSON names.
// Encoding always writes all 14 keys in a fixed order, null for absent optional fields,
// which is also how the API re-serialises groups. Floats are written in the shortest
// form that parses back to the same value (float32 for teacher logprobs, float64
// elsewhere). Build a group one sequence at a time with [ScoredDataGroup.Add]; check it
// with [ScoredDataGroup.Validate] (the API checks almost nothing, and a NaN makes it lose
// a whole batch later).
//
// The distill fields (distill_token_ids / distill_logprobs, ragged [seq][pos][k]) are
// held per sequence as [DistillRows]: flat int32 ids and float32 logprobs with
// per-position offsets, one row per token, an empty row where the teacher was not
// asked. Encoding and decoding stream them without nested slices. [EncodeOptions]
// DenseZeroPad writes the fixed L×K zero-padded layout some trainers expect.
//
// Messages are stored as raw JSON objects ([encoding/json.RawMessage]), one per message,
// rather than as [chat.Message]: groups read back from the API or from files may carry
// fields chat.Message has no room for (content parts, "reward"), and the API passes
// them through unchanged. [Sequence.Messages] takes chat.Message values for building, and
// [ScoredDataGroup.ChatMessages] decodes them back.
//
// inference_logprobs follows Atropos: aligned 1:1 with tokens, [MaskedLogprob] (1.0) at
// masked positions, the sampling logprob at trained ones. The reference trainer crashes
// when it is null; set [ClientConfig.RequireInferenceLogprobs] to refuse such groups.
//
// # Env side
//
// [Client] follows BaseEnv's contract. [Client.Register] waits until /info shows a
// trainer, then posts /register-env until "success" (the API says "wait for trainer to
// start" until the trainer's first /batch), then replays the spool. [Client.Ready],
// [Client.WaitReady] and [Client.Pace] apply BaseEnv's back-pressure rules ([Decision]) to
// GET /status-env (a GET with a JSON body, kept behind one function). [Client.Send]
// posts one group to /scored_data or several to /scored_data_list, gzipped from
// [GzipMinBytes]; "received" and "buffered" both mean accepted.
//
// Delivery is at least once. Every group handed to Send is written to the spool
// directory and fsynced (file and directory) before the first request, and removed only
// once /status-env shows that the API served it (see below). Network errors and 5xx
// replies are retried with backoff; when the context ends first, the groups stay in the
// spool ([ErrSpooled]) and the next [Client.Flush] — which Register runs, so a
// restarted process sends them first — sends them again. Killing the process at any
// moment after Send wrote the spool file loses no group, even when the API dies with
// it, but a group may reach the API twice. A 4xx reply is permanent: the group goes to
// the dead-letter file with the server's message ([ErrRejected], [ReadDeadLetters]),
// never silently dropped. Call [Client.Disconnect] on clean shutdown.
//
// # Restarts and resets
//
// The API keeps all state in memory: a restart or a /reset_data forgets the trainer,
// every env and the queue, and hands out env ids from 0 again, so an env that kept its
// old id may find it belongs to another env. The client therefore never posts a group,
// paces, or disconnects under a registration it does not know to be current. After any
// failed request (network error, 5xx, timeout, unexpected body; not 408, 429 or other
// 4xx) the registration is suspect, and before the next post or poll it is verified:
//   - a refused connection means the API process was down: lost;
//   - /info at batch_size -1 means the trainer's registration is gone: lost;
//   - a /status-env current_step below the highest seen (to a poll begun after it was
//     seen) means the step counter restarted: lost;
//   - /status-env failing with a 5xx for the env's id several rounds in a row while
//     /info shows a trainer means the id no longer exists: lost;
//   - /info showing another batch size or max token length than at registration means
//     a trainer registered again with another configuration: lost;
//   - otherwise (/info shows a trainer, /status-env answers with no step gone back) the
//     registration stands.
//
// While a retry waits out its backoff under a suspect registration, the client asks
// /info every [ClientConfig.StatusInterval]: an API that went down and came back
// before the next attempt (possibly with this env's id handed to another env) is
// still seen down, by a refused connection, and the wait ends there.
//
// Besides, each post and each disconnect is preceded by a GET /status-env check sent at
// most [ClientConfig.MaxCheckAge] (500 ms) before the post goes out, by the monotonic
// clock; an older check (a slow answer, a process stopped between check and post) is
// made again. When the round trips take longer than that (a loaded API, a slow link),
// the limit doubles after three checks in a row came back too old, up to 64 ×
// MaxCheckAge, with a warning, so that posts go on; the limit is kept across posts
// ([Client.StatusCheckLimit]) and halves after each check younger than half of it. When
// even the widest limit is too short, the post gives up with an error (the group stays
// in the spool) instead of checking for ever. A reply to any poll shows a reset when its current_step went back, or when
// its self_queue_size does not match what this env sent: more groups queued under the
// id than this env can have there (another env's groups under a re-issued id), or fewer
// than the groups it posted since it last saw the step move, which no batch can have
// taken while the step stays (the API lost its queue). A lost registration is renewed
// in the start-up order (wait for the trainer, then /register-env), and in-flight posts
// are stamped with the new id.
//
// A paused process does not trust what it sees. While requests under the registration
// keep coming, a heartbeat timer runs every tenth of [ClientConfig.PauseLimit] (3 s);
// when the process stood still for longer than the limit (a beat came that late, or is
// that overdue when a request begins), or the wall clock moved more than a second apart
// from the monotonic one, the process was stopped, swapped out or suspended: the API
// may have restarted and given its id to another env whose queue looks like this env's.
// A slow API does not look like a pause: the beats go on while a reply is awaited. The
// client then retires the registration without a word to the API (no disconnect under
// an id it cannot confirm), registers again, and treats what the old registration had
// accepted as an earlier registration's (below). [Client.Retired] counts this. An idle
// client's beats stop once no request began for the limit, and its next request, that
// long after the last, retires the registration too: Serve polls every 100 ms, also
// while its last groups finish; a caller that posts rarely should poll [Client.Status]
// in between, or raise PauseLimit.
//
// # How many copies
//
// A group handed to Send reaches the trainer at least once (or is in the dead-letter
// file) and at most twice ([ClientConfig.MaxCopies]), and two copies never wait in one
// queue, whatever dies when:
//   - the spool file's name counts the posts the API took or may have taken (renamed
//     durably before each post, and back after one the API surely did not take), with
//     the env id of the last; a file posted twice is never posted a third time: when it would be,
//     its groups go to the dead-letter file with why (the trainer may have them once or
//     twice, or not at all) and [Client.Abandoned] counts them;
//   - groups accepted under a registration that is no longer this client's (a dead
//     process's, found in the spool by the next Register; or one retired after a pause)
//     wait until that id's queue shows none of them can still be there: self_queue_size
//     0, a queue that grew or holds more than that registration had, the step gone back,
//     the id failing, the id now this client's own, or this client's registration lost.
//     Only then are they sent again ([Client.Waiting] counts them meanwhile). Nothing
//     proves that an API holds a given earlier file: an env id names a registration
//     only within one API life, and a counted post may never have reached the API.
//
// So a process that dies, or an API that dies, costs one copy at the trainer of the
// groups the API had taken and the env had not yet seen served. Two such losses of the same group within the time the
// env needs to see it served (a batch formed after it) put it in the dead-letter file.
// A post that fails while the process lives, after the API may have taken it (a
// dropped connection, a garbled reply, a proxy's 502 or 504), and that the next status
// poll cannot rule out, is retried at once, as the API cannot say whether it took it:
// both posts count toward the two, and the two copies may wait in one queue.
//
// The bound has a price on a faulty network: a group whose posts timed out or were cut
// off (counted, as the API may have taken them) and whose API then died before the env
// saw it served is dead-lettered, though the trainer has it once in most such cases.
// This is the choice of the default: no trainer sees a group a third time, and no group
// is dropped without a trace ([ReadDeadLetters] reads them back, with why, for an
// operator who wants to post them again). MaxCopies 1 delivers at most once; 3 or more
// dead-letters fewer groups and lets more copies through.
//
// What cannot be seen. The API tells an env nothing about restarts: the trainer's
// registration uuid is shown only to the trainer, and env ids are list indices handed out
// again. So a restart stays unseen when, between two requests of this env, the API
// restarted, the trainer registered again at a step not below the last one this env
// saw, another env took this env's id, and the queue under that id holds as many groups
// as this env could have there (typically: this env had nothing queued and the other
// env posted nothing yet); this env then acts under the other env's id until one of the
// signs above shows. Checks bound the age of what they saw, not what happens after:
// a restart within MaxCheckAge (or its widened limit) after a check, or a post held on its way to the API (a
// process stopped between the last clock reading and the request being written, a
// proxy holding it), can still reach the restarted API. With Serve's polls every 100 ms
// and PauseLimit, an unseen restart needs the API killed, started again, the trainer
// registered and another env registered within one poll interval of a live process; a
// real run-api takes seconds to start. To close it entirely, an operator restarts the
// trainer from step 0 whenever the API restarts (the step going back is always seen),
// or restarts the env processes with the API.
//
// "received" means only that a group is in the API's in-memory queue. The client keeps
// every accepted group's spool file until /status-env shows it was served (out of the
// queue, then a later batch formed: the API forms new batches only once the earlier
// ones were served), and on a reset makes those not known to be served sendable again
// ([Client.Resent]); a process that dies (alone, or with the API) leaves them in the
// spool, and the next Register sends them. Nothing accepted is lost to a reset or a
// crash; some groups may reach the trainer twice. After a successful [Client.Disconnect]
// the files of groups the API still holds are removed. The client cannot count the
// groups a reset really lost: the API never says which accepted groups it served, and
// /status-env leaves out formed batches not yet served.
//
// # Trainer side
//
// [Trainer] registers (the 128-bit uuid is decoded into a [math/big.Int]) and polls
// [Trainer.Batch], which handles {"batch": null}, the 200 error object of an
// unregistered API ([ErrNotRegistered]) and decodes groups into ScoredDataGroup. The
// API forms every batch it can at once, jumps the step counter by that many, and serves
// them newest first.
//
// # Files
//
// [Encoder] / [WriteJSONL] and [Decoder] / [ReadJSONL] read and write one group per line,
// the format of BaseEnv's process mode, holding one group at a time.
//
// The package uses only the standard library besides [chat]. The fake API for tests is
// in package atropostest.
package atropos
