package kube

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// phase is what a pod's status means to the factory.
type phase int

const (
	phasePending   phase = iota // not ready yet; keep waiting
	phaseReady                  // the main container runs
	phaseStartFail              // it will not start: an error of the factory
	phaseAgent                  // ended by what its commands did: scored, never an error
	phaseLost                   // ended for a reason no command explains: an error of the factory
)

// Kinds of agent-caused ends ([Result.Ended]).
const (
	EndMemory   = "memory"   // the container was OOM-killed at its memory limit
	EndStorage  = "storage"  // evicted for using more ephemeral storage than its limit
	EndDeadline = "deadline" // the pod's activeDeadlineSeconds passed
	EndExited   = "exited"   // the main process (the helper) was ended from inside the pod
)

// podState is a pod's phase and, for an end, its kind and a sentence a person reads.
type podState struct {
	phase  phase
	kind   string // for phaseAgent: EndMemory...
	reason string
}

// Waiting reasons that will not go away by waiting: the pod will not start.
var fatalWaiting = map[string]bool{
	"ImagePullBackOff":           true,
	"InvalidImageName":           true,
	"ErrImageNeverPull":          true,
	"CreateContainerConfigError": true,
	"CreateContainerError":       true,
	"RunContainerError":          true,
}

// classify reads a pod's status. A nil pod is one that no longer exists.
func classify(p *corev1.Pod) podState {
	if p == nil {
		return podState{phase: phaseLost, reason: "the pod was deleted"}
	}
	if p.DeletionTimestamp != nil {
		return podState{phase: phaseLost, reason: "the pod is being deleted"}
	}
	st := p.Status
	main := containerStatus(st.ContainerStatuses, ContainerName)
	switch st.Phase {
	case corev1.PodFailed, corev1.PodSucceeded:
		return classifyEnd(p, main)
	}
	if main != nil && main.State.Terminated != nil {
		return classifyEnd(p, main)
	}
	for _, cs := range append(append([]corev1.ContainerStatus(nil), st.InitContainerStatuses...), st.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil && fatalWaiting[w.Reason] {
			return podState{phase: phaseStartFail, reason: fmt.Sprintf("container %s: %s: %s", cs.Name, w.Reason, w.Message)}
		}
		if t := cs.State.Terminated; t != nil && cs.Name == InitContainerName && t.ExitCode != 0 {
			return podState{phase: phaseStartFail, reason: fmt.Sprintf("the helper's init container failed: exit %d, %s: %s", t.ExitCode, t.Reason, t.Message)}
		}
	}
	if main != nil && main.State.Running != nil {
		return podState{phase: phaseReady}
	}
	return podState{phase: phasePending, reason: pendingReason(p)}
}

// classifyEnd reads a pod, or its main container, that has ended.
func classifyEnd(p *corev1.Pod, main *corev1.ContainerStatus) podState {
	st := p.Status
	switch {
	case st.Reason == "DeadlineExceeded":
		return podState{phase: phaseAgent, kind: EndDeadline, reason: "the pod reached its deadline (activeDeadlineSeconds)"}
	case st.Reason == "Evicted":
		// The kubelet's message for a container over its own limit:
		// "Container sandbox exceeded its local ephemeral storage limit ..." and
		// "Pod ephemeral local storage usage exceeds the total limit of containers".
		// Node pressure ("The node was low on resource: ...") is not the agent's.
		m := strings.ToLower(st.Message)
		if strings.Contains(m, "ephemeral") && (strings.Contains(m, "exceeds") || strings.Contains(m, "exceeded")) {
			return podState{phase: phaseAgent, kind: EndStorage, reason: "the pod was evicted for its ephemeral storage: " + st.Message}
		}
		return podState{phase: phaseLost, reason: "the pod was evicted: " + st.Message}
	}
	if main != nil {
		if t := main.State.Terminated; t != nil {
			switch {
			case t.Reason == "OOMKilled":
				return podState{phase: phaseAgent, kind: EndMemory, reason: "the container reached its memory limit and was OOM-killed"}
			case t.ExitCode != 0 && t.Reason == "Error":
				return podState{phase: phaseAgent, kind: EndExited,
					reason: fmt.Sprintf("the container's main process was ended from inside the pod (exit %d)", t.ExitCode)}
			default:
				return podState{phase: phaseLost, reason: fmt.Sprintf("the container ended: exit %d, %s %s", t.ExitCode, t.Reason, t.Message)}
			}
		}
	}
	return podState{phase: phaseLost, reason: fmt.Sprintf("the pod ended: %s %s %s", st.Phase, st.Reason, st.Message)}
}

// pendingReason says why a pending pod is not ready yet (for an error at the start
// timeout): an unschedulable condition, a waiting container.
func pendingReason(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return fmt.Sprintf("not scheduled: %s: %s", c.Reason, c.Message)
		}
	}
	for _, cs := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil {
			return fmt.Sprintf("container %s: %s: %s", cs.Name, w.Reason, w.Message)
		}
	}
	return "pod phase " + string(p.Status.Phase)
}

func containerStatus(ss []corev1.ContainerStatus, name string) *corev1.ContainerStatus {
	for i := range ss {
		if ss[i].Name == name {
			return &ss[i]
		}
	}
	return nil
}
