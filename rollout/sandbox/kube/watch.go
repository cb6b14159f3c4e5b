package kube

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// rewatchDelay is the pause before a watch that failed is made again.
const rewatchDelay = time.Second

// recheckEvery is how often a waiter reads its pod itself, in case the watch missed
// an event.
const recheckEvery = 30 * time.Second

// podWatch is the factory's one watch on its pods (label selector LabelOwner), and
// what it last saw of each pod the factory tracks. Waiters are woken per pod.
type podWatch struct {
	client    kubernetes.Interface
	namespace string
	selector  string
	log       *slog.Logger

	mu      sync.Mutex
	tracked map[string]*seenPod
}

type seenPod struct {
	pod     *corev1.Pod // nil until seen
	deleted bool
	changed chan struct{} // closed and replaced at each change
}

func newPodWatch(c kubernetes.Interface, namespace, selector string, log *slog.Logger) *podWatch {
	return &podWatch{client: c, namespace: namespace, selector: selector, log: log, tracked: map[string]*seenPod{}}
}

// track starts keeping what the watch says of pod name.
func (w *podWatch) track(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.tracked[name] == nil {
		w.tracked[name] = &seenPod{changed: make(chan struct{})}
	}
}

// forget stops tracking name.
func (w *podWatch) forget(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.tracked, name)
}

// set records p (nil with deleted for a pod that is gone) if it is tracked.
func (w *podWatch) set(name string, p *corev1.Pod, deleted bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.tracked[name]
	if s == nil {
		return
	}
	s.pod, s.deleted = p, deleted
	close(s.changed)
	s.changed = make(chan struct{})
}

// get returns what was last seen of name: the pod (nil when not yet seen or gone),
// whether it is gone, and a channel closed at the next change.
func (w *podWatch) get(name string) (*corev1.Pod, bool, <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.tracked[name]
	if s == nil {
		ch := make(chan struct{})
		return nil, true, ch
	}
	return s.pod, s.deleted, s.changed
}

// run lists and watches until ctx ends; started is closed once the first watch is
// open (or ctx ended).
func (w *podWatch) run(ctx context.Context, started chan<- struct{}) {
	first := true
	for ctx.Err() == nil {
		err := w.once(ctx, func() {
			if first {
				first = false
				close(started)
			}
		})
		if ctx.Err() != nil {
			break
		}
		if err != nil {
			w.log.LogAttrs(ctx, slog.LevelDebug, "kube: pod watch", slog.String("error", err.Error()))
		}
		t := time.NewTimer(rewatchDelay)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	if first {
		close(started)
	}
}

// once lists the pods, then watches from the list's version until the watch ends.
func (w *podWatch) once(ctx context.Context, opened func()) error {
	pods := w.client.CoreV1().Pods(w.namespace)
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: w.selector})
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	present := map[string]bool{}
	for i := range list.Items {
		p := &list.Items[i]
		present[p.Name] = true
		w.set(p.Name, p, false)
	}
	w.mu.Lock()
	var gone []string
	for name, s := range w.tracked {
		if s.pod != nil && !s.deleted && !present[name] {
			gone = append(gone, name)
		}
	}
	w.mu.Unlock()
	for _, name := range gone {
		w.set(name, nil, true)
	}
	wi, err := pods.Watch(ctx, metav1.ListOptions{LabelSelector: w.selector, ResourceVersion: list.ResourceVersion, AllowWatchBookmarks: true})
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	defer wi.Stop()
	opened()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-wi.ResultChan():
			if !ok {
				return nil
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				if p, ok := ev.Object.(*corev1.Pod); ok {
					w.set(p.Name, p, false)
				}
			case watch.Deleted:
				if p, ok := ev.Object.(*corev1.Pod); ok {
					w.set(p.Name, nil, true)
				}
			case watch.Error:
				return fmt.Errorf("watch: %v", apierrors.FromObject(ev.Object))
			}
		}
	}
}

// refresh reads pod name from the API server and records it.
func (w *podWatch) refresh(ctx context.Context, name string) error {
	p, err := w.client.CoreV1().Pods(w.namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		w.set(name, nil, true)
		return nil
	case err != nil:
		return err
	}
	w.set(name, p, false)
	return nil
}

// wait waits until pod name's state is not pending and returns it, or ctx's error.
// It reads the pod itself at first and every recheckEvery, in case the watch
// missed an event.
func (w *podWatch) wait(ctx context.Context, name string, done func(podState) bool) (podState, error) {
	next := time.Now()
	for {
		if !time.Now().Before(next) {
			if err := w.refresh(ctx, name); err != nil && ctx.Err() == nil {
				w.log.LogAttrs(ctx, slog.LevelDebug, "kube: read pod", slog.String("pod", name), slog.String("error", err.Error()))
			}
			next = time.Now().Add(recheckEvery)
		}
		p, deleted, changed := w.get(name)
		var st podState
		switch {
		case deleted:
			st = classify(nil)
		case p == nil:
			st = podState{phase: phasePending, reason: "not seen yet"}
		default:
			st = classify(p)
		}
		if done(st) {
			return st, nil
		}
		t := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			t.Stop()
			return st, ctx.Err()
		case <-changed:
		case <-t.C:
		}
		t.Stop()
	}
}
