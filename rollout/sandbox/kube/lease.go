package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
)

// leaseExpiry is how many lease durations a Lease may go unrenewed before a sweep
// deletes it (and the garbage collector its pods).
const leaseExpiry = 3

// holderIdentity names the env process: host:pid.
func holderIdentity() string {
	host, _ := os.Hostname()
	return host + ":" + strconv.Itoa(os.Getpid())
}

// buildLease is the factory's Lease, renewed now.
func buildLease(namespace, name, holder string, d time.Duration, now time.Time) *coordinationv1.Lease {
	secs := int32(seconds(d))
	t := metav1.NewMicroTime(now)
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Namespace:   namespace,
			Labels:      map[string]string{LabelManagedBy: ManagedBy},
			Annotations: map[string]string{AnnotationHolder: holder},
		},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       &holder,
			LeaseDurationSeconds: &secs,
			AcquireTime:          &t,
			RenewTime:            &t,
		},
	}
}

// leaseExpired reports whether l went unrenewed for leaseExpiry durations at now.
// A Lease without a renew time counts from its creation.
func leaseExpired(l *coordinationv1.Lease, now time.Time) bool {
	last := l.CreationTimestamp.Time
	if l.Spec.RenewTime != nil {
		last = l.Spec.RenewTime.Time
	}
	d := DefaultLeaseDuration
	if l.Spec.LeaseDurationSeconds != nil && *l.Spec.LeaseDurationSeconds > 0 {
		d = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	return now.Sub(last) > leaseExpiry*d
}

// renewLease sets the Lease's renew time to now. A Lease that is gone is made
// again under the same name (its pods, owned by the old one, are being collected);
// the owner returned is then the new one.
func renewLease(ctx context.Context, c kubernetes.Interface, namespace string, cur owner, holder string, d time.Duration, now time.Time) (owner, error) {
	leases := c.CoordinationV1().Leases(namespace)
	l, err := leases.Get(ctx, cur.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || (err == nil && l.UID != cur.UID) {
		return createLease(ctx, c, namespace, cur.Name, holder, d, now)
	}
	if err != nil {
		return cur, fmt.Errorf("kube: renew lease %s: %w", cur.Name, err)
	}
	t := metav1.NewMicroTime(now)
	l.Spec.RenewTime = &t
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		return cur, fmt.Errorf("kube: renew lease %s: %w", cur.Name, err)
	}
	return cur, nil
}

// createLease creates the factory's Lease (replacing a Lease of that name that is
// not ours).
func createLease(ctx context.Context, c kubernetes.Interface, namespace, name, holder string, d time.Duration, now time.Time) (owner, error) {
	l, err := c.CoordinationV1().Leases(namespace).Create(ctx, buildLease(namespace, name, holder, d, now), metav1.CreateOptions{})
	if err != nil {
		return owner{}, fmt.Errorf("kube: create lease %s/%s: %w", namespace, name, err)
	}
	return owner{Name: l.Name, UID: l.UID}, nil
}

// SweepResult counts what [Sweep] deleted.
type SweepResult struct {
	// Leases are the expired Leases deleted.
	Leases int
	// Pods are the pods deleted whose owner Lease was gone or expired.
	Pods int
	// NetworkPolicies are the NetworkPolicies deleted whose owner was gone.
	NetworkPolicies int
}

// Sweep deletes, in namespace, what factories that are gone left behind: Leases
// labelled app.kubernetes.io/managed-by=agenticopd not renewed for three of their
// durations, then the pods and NetworkPolicies with that label whose owner Lease no
// longer exists (the garbage collector normally deletes them; a cluster without
// one, or a collector behind, leaves them). A live factory's objects are never
// touched: its Lease is renewed every third of its duration. Every factory sweeps
// at [New] and every Config.SweepInterval; Sweep is exported for operators (a
// CronJob, a shell). It needs list and delete on leases, pods and
// networkpolicies in namespace. Errors of single deletions are joined; what was
// deleted is counted either way.
func Sweep(ctx context.Context, client kubernetes.Interface, namespace string) (SweepResult, error) {
	return sweep(ctx, client, namespace, time.Now())
}

func sweep(ctx context.Context, c kubernetes.Interface, namespace string, now time.Time) (SweepResult, error) {
	var res SweepResult
	var errs []error
	sel := labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedBy}).String()
	leases, err := c.CoordinationV1().Leases(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return res, fmt.Errorf("kube: sweep: list leases: %w", err)
	}
	live := map[string]bool{}
	for i := range leases.Items {
		l := &leases.Items[i]
		if !leaseExpired(l, now) {
			live[l.Name] = true
			continue
		}
		// The resource version as a precondition: a Lease renewed since the
		// list is alive and stays.
		err := c.CoordinationV1().Leases(namespace).Delete(ctx, l.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &l.UID, ResourceVersion: &l.ResourceVersion},
		})
		switch {
		case err == nil:
			res.Leases++
		case apierrors.IsConflict(err):
			live[l.Name] = true
		case apierrors.IsNotFound(err):
		default:
			errs = append(errs, fmt.Errorf("delete lease %s: %w", l.Name, err))
			live[l.Name] = true
		}
	}
	orphan := func(m metav1.Object) bool {
		if name := m.GetLabels()[LabelOwner]; live[name] {
			return false
		}
		for _, r := range m.GetOwnerReferences() {
			if r.Kind == "Lease" && live[r.Name] {
				return false
			}
		}
		return true
	}
	pods, err := c.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return res, errors.Join(append(errs, fmt.Errorf("kube: sweep: list pods: %w", err))...)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if !orphan(p) {
			continue
		}
		if err := deletePod(ctx, c, namespace, p.Name); err != nil {
			errs = append(errs, err)
			continue
		}
		res.Pods++
	}
	pols, err := c.NetworkingV1().NetworkPolicies(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return res, errors.Join(append(errs, fmt.Errorf("kube: sweep: list networkpolicies: %w", err))...)
	}
	for i := range pols.Items {
		p := &pols.Items[i]
		if !orphan(p) {
			continue
		}
		err := c.NetworkingV1().NetworkPolicies(namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete networkpolicy %s: %w", p.Name, err))
			continue
		}
		res.NetworkPolicies++
	}
	if len(errs) > 0 {
		return res, fmt.Errorf("kube: sweep: %w", errors.Join(errs...))
	}
	return res, nil
}

// deletePod deletes a pod at once (grace 0, dependents in the background); a pod
// already gone is no error.
func deletePod(ctx context.Context, c kubernetes.Interface, namespace, name string) error {
	grace := int64(0)
	bg := metav1.DeletePropagationBackground
	err := c.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace, PropagationPolicy: &bg})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete pod %s: %w", name, err)
	}
	return nil
}

// logSweep logs a sweep that deleted something, or failed.
func logSweep(ctx context.Context, log *slog.Logger, res SweepResult, err error) {
	if err != nil {
		log.LogAttrs(ctx, slog.LevelWarn, "kube: sweep", slog.String("error", err.Error()))
	}
	if res != (SweepResult{}) {
		log.LogAttrs(ctx, slog.LevelInfo, "kube: swept what gone factories left",
			slog.Int("leases", res.Leases), slog.Int("pods", res.Pods), slog.Int("network_policies", res.NetworkPolicies))
	}
}
