package kube

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestClassify(t *testing.T) {
	main := func(s corev1.ContainerState) []corev1.ContainerStatus {
		return []corev1.ContainerStatus{{Name: ContainerName, State: s}}
	}
	waiting := func(reason string) corev1.ContainerState {
		return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "m"}}
	}
	term := func(code int32, reason string) corev1.ContainerState {
		return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason}}
	}
	now := metav1.Now()
	cases := []struct {
		name  string
		pod   *corev1.Pod
		phase phase
		kind  string
	}{
		{"gone", nil, phaseLost, ""},
		{"being deleted", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}}, phaseLost, ""},
		{"no status yet", &corev1.Pod{}, phasePending, ""},
		{"pulling", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: main(waiting("ContainerCreating"))}}, phasePending, ""},
		{"ErrImagePull is retried by the kubelet", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: main(waiting("ErrImagePull"))}}, phasePending, ""},
		{"ImagePullBackOff", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: main(waiting("ImagePullBackOff"))}}, phaseStartFail, ""},
		{"helper image not pulled", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending,
			InitContainerStatuses: []corev1.ContainerStatus{{Name: InitContainerName, State: waiting("ErrImageNeverPull")}}}}, phaseStartFail, ""},
		{"InvalidImageName", &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: main(waiting("InvalidImageName"))}}, phaseStartFail, ""},
		{"CreateContainerError", &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: main(waiting("CreateContainerError"))}}, phaseStartFail, ""},
		{"init failed", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending,
			InitContainerStatuses: []corev1.ContainerStatus{{Name: InitContainerName, State: term(1, "Error")}}}}, phaseStartFail, ""},
		{"unschedulable waits", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable"}}}}, phasePending, ""},
		{"running", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: main(corev1.ContainerState{Running: &corev1.ContainerStateRunning{}})}}, phaseReady, ""},
		{"OOMKilled", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: main(term(137, "OOMKilled"))}}, phaseAgent, EndMemory},
		{"OOMKilled before the pod phase says so", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: main(term(137, "OOMKilled"))}}, phaseAgent, EndMemory},
		{"deadline", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "DeadlineExceeded"}}, phaseAgent, EndDeadline},
		{"evicted for its storage", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted",
			Message: "Pod ephemeral local storage usage exceeds the total limit of containers 4Gi."}}, phaseAgent, EndStorage},
		{"evicted by node pressure", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted",
			Message: "The node was low on resource: memory."}}, phaseLost, ""},
		{"helper killed from inside", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: main(term(143, "Error"))}}, phaseAgent, EndExited},
		{"idle exit", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: main(term(0, "Completed"))}}, phaseLost, ""},
		{"node lost", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "NodeLost"}}, phaseLost, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := classify(tc.pod)
			if st.phase != tc.phase || st.kind != tc.kind {
				t.Errorf("classify = phase %d kind %q (%s), want phase %d kind %q", st.phase, st.kind, st.reason, tc.phase, tc.kind)
			}
		})
	}
}
