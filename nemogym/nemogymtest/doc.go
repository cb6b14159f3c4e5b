// Package nemogymtest fakes the NeMo Gym side of training, in process and over real
// HTTP on loopback, so that the agent server and the model-server policy of package
// nemogym are tested as the trainer would use them:
//
//   - [ModelServer]: NeMo Gym's model server in training mode in front of NeMo RL's
//     OpenAI-compatible server, backed by a vLLM (the vllmtest simulator): token
//     fields on every answer, the three together or not at all, replayed fields
//     refused when changed, the prompt spliced by EOS count as NeMo RL does, NeMo RL's
//     sampling asserts, the Gym hop's dropping of undeclared keys; fault injection
//     (errors, stalls, altered answers).
//   - [Collector]: rows repeated in NeMo Gym's order, all /run requests at once, the
//     collector's keys stamped into the results, failures classified by status as
//     NeMo RL does ([Classify]) or aborting the run as the standalone collector does.
//   - The trainer's post-processing checks: [CheckResult], [CheckItems] and
//     [CheckGroups], one error per check (C2–C10 of the reference, the NaN check on
//     decoded items since JSON cannot carry NaN).
//
// Not modelled: the Responses path of the model server (/v1/responses and its item
// conversion), router replay (routed_experts), resume from the failures file,
// /aggregate_metrics statistics, and the model server's cookie-keyed endpoint
// affinity (one backend).
package nemogymtest
