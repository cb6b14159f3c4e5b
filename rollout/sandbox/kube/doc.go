// Package kube runs each rollout sandbox as a Kubernetes pod, so that rollouts and
// their grading run on a cluster, on the task's own image, while the env process
// stays where it is. [Factory] implements [rollout.SandboxFactory],
// [rollout.SpecFactory] and [rollout.Prestarter]; [Sandbox] implements
// [rollout.Sandbox], [rollout.Starter], [rollout.Restorer] and [rollout.Searcher].
//
//	f, err := kube.New(ctx, kube.Config{
//		REST:        restConfig, // from a kubeconfig: the library reads no file or environment
//		Namespace:   "agenticopd",
//		HelperImage: "…/agenticopd-pod:v1", // agenticopd-pod image writes it
//		Image:       "…/python:3.12",       // for function-level tasks
//	})
//	defer f.Close()
//	env, err := agenticopd.NewEnv(agenticopd.Config{SandboxFactory: f /* … */})
//
// Only programs that import this package link client-go.
//
// # How a command reaches a pod
//
// By exec through the API server, and no other way: no Service, no port-forward,
// no pod IP, so the env host needs no route to the pod network. Each call (a
// command, a file read, a write, a listing, a search, a restore) is one exec of the
// static helper agenticopd-pod in the pod's main container (package podproto
// speaks its protocol), over WebSocket v5.channel.k8s.io, which carries stdin's end
// of file, falling back to SPDY where the server refuses the upgrade
// (remotecommand.NewFallbackExecutor). Exec does not kill: a closed stream leaves
// its command running. So timeouts, output caps, the kill of a command's whole
// tree and the file tools' refusals (paths out of the workspace, symlinks out of
// it, FIFOs, devices) are the helper's, in the pod, as the bubblewrap sandbox's are
// on the host; a call whose context ends sends a second exec that kills its
// command, and a command whose exec stream breaks is killed by the helper when its
// held stdin ends (seen on the test cluster: containerd ends an exec's stdin when
// its stream drops, so an env process SIGKILLed mid-group leaves no command
// running, and its pods end after IdleExit). At most Config.MaxExecs streams are open at once; the client's
// QPS and Burst are raised to Config.QPS and Config.Burst (client-go's 5 and 10
// throttle a group's start).
//
// # The pod
//
// buildPod, a pure function of Config and the spec, makes every sandbox pod:
//
//   - the main container is the spec's image (Config.Image for a spec that names
//     none), its command the helper as PID 1 (serve -idle Config.IdleExit), its
//     working directory the workspace (spec.WorkDir, else Config.WorkDir, created
//     empty by the runtime where the image lacks it; the image's own WorkingDir is
//     not read: the factory does not fetch image configurations), its environment
//     the image's, as the runtime sets it for an exec;
//   - an init container from Config.HelperImage copies the helper into an emptyDir
//     mounted at /.agenticopd, read-only in the main container; no task image is
//     changed;
//   - restartPolicy Never, activeDeadlineSeconds Config.PodDeadline,
//     terminationGracePeriodSeconds 0, automountServiceAccountToken false (no API
//     credentials inside), enableServiceLinks false, both containers with
//     capabilities dropped (ALL), allowPrivilegeEscalation false and the
//     RuntimeDefault seccomp profile; runtimeClassName and hostUsers: false when
//     Config asks; cpu, memory and ephemeral-storage limits from Config.Limits with
//     requests equal (Guaranteed QoS); imagePullPolicy Config.ImagePullPolicy;
//   - labels app.kubernetes.io/managed-by=agenticopd, agenticopd.io/owner (the
//     Lease), agenticopd.io/net, agenticopd.io/role and agenticopd.io/pool (a hash
//     of image, workspace and network, which a preferred podAffinity uses so that a
//     group's pods share a node and one pull); an ownerReference to the factory's
//     Lease; no finalizer.
//
// # What is enforced, and what is not
//
// Memory and cpu are the container's cgroup limits, held by the kernel for every
// process of the sandbox together. Network false: every pod without network is
// selected by the factory's deny-all NetworkPolicy (ingress and egress). A policy
// is only as good as the network plugin, and a plugin that does not enforce
// policies ignores it silently, so New runs a probe pod under the policy and reads
// its interfaces (/sys/class/net, through the helper; the probe makes no
// connection): a pod with only a loopback interface has no network whatever the
// plugin ([NetworkLoopbackOnly]); otherwise the factory refuses specs with Network
// false ([ErrNetworkUnenforced]) unless Config.TrustNetworkPolicy says the plugin
// enforces policies ([NetworkPolicyTrusted]). A sandbox with network never claims
// none. Not enforced, and said so in [Enforcement.NotEnforced]: a pids limit per
// pod (the pod spec has none; only the kubelet's node-wide podPidsLimit), storage
// as the kernel would (ephemeral-storage is the kubelet's eviction, after the
// fact), a read-only root (the container's root is writable, as under Docker;
// only the workspace's diff reaches grading, in a fresh pod), a non-root user
// unless Config.UserNamespaces, and a kernel of its own unless
// Config.RuntimeClassName names gVisor or Kata.
//
// # Whose fault a failure is
//
// Invariant 9 of the design: what the agent's commands can cause never fails a
// group. A container OOM-killed at its memory limit, a pod evicted for exceeding
// its ephemeral-storage limit, a pod past its activeDeadlineSeconds, a helper ended
// from inside the pod: the command that was running reports exit code 137 with a
// note in Stderr, no error; so does every later command; [Sandbox.Ended] names the
// end, Restore does nothing, and the file calls fail with [ErrSandboxEnded]. The
// factory's errors are returned as errors: an image that does not pull
// (ImagePullBackOff, InvalidImageName, ErrImageNeverPull), a container that cannot
// be created, a pod not scheduled within Config.StartTimeout ([ErrPodStart]), API
// errors, and a pod that ended for any other reason (deleted by someone else,
// evicted by node pressure, the helper's idle exit, a lost Lease: [ErrPodLost]).
//
// # Clean-up, in layers
//
//  1. Every pod and the NetworkPolicy have an ownerReference to one
//     coordination.k8s.io Lease per factory, renewed every third of
//     Config.LeaseDuration while the process lives. Deleting the Lease deletes
//     everything (the garbage collector, in the background).
//  2. Each pod ends itself: the helper's PID 1 exits after Config.IdleExit without an
//     exec, and activeDeadlineSeconds ends it regardless. After a SIGKILL of the
//     env process no sandbox computes for longer than IdleExit.
//  3. New, and every Config.SweepInterval each live factory, sweeps the namespace
//     ([Sweep], exported for operators): Leases not renewed for three durations
//     are deleted, then the managed pods and NetworkPolicies whose owner Lease is
//     gone (the collector normally has done it; a cluster may run none).
//  4. No finalizers, Services, Secrets or volumes claims: nothing else to leak.
//
// Close of a Sandbox deletes its pod (grace 0). Close of the Factory deletes every
// pod it made and did not delete yet, its NetworkPolicy and its Lease. The other
// side of layer 3: a process cut off from the API server for three lease durations
// loses its Lease, and with it its pods; its sandboxes then fail with
// [ErrPodLost], never scored. Warm pools: [Factory.Prestart] creates pods ahead for
// a spec (the env asks for the next group's 2×G: G rollouts and G grading
// sandboxes), at most Config.MaxIdle waiting, created at most Config.CreateQPS per
// second; a pod is handed out once and never reused.
//
// # RBAC
//
// The factory needs, in its namespace only (a Role, no ClusterRole):
//
//	pods: create, get, list, watch, delete
//	pods/exec: create (and get, for the WebSocket upgrade, which is a GET)
//	leases (coordination.k8s.io): create, get, list, update, delete
//	networkpolicies (networking.k8s.io): create, list, delete
//
// Without the NetworkPolicy rights New goes on, and the network is reported
// unenforced. Pods run as the image's user; with SWE images that is root, so the
// namespace needs the baseline Pod Security level, not restricted.
//
// # Logging
//
// The library logs to Config.Logger only. client-go logs through klog, a global
// of its own (broken exec streams at error level): a program that wants it quiet
// sets klog's logger.
package kube
