package kube

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/agentic-opd/agenticopd/rollout/sandbox/kube/podproto"
)

// NetworkMode says how a sandbox whose spec has Network false is kept off the
// network.
type NetworkMode int

const (
	// NetworkUnenforced: the factory cannot show that pods are kept off the network
	// (the probe pod had interfaces beside loopback, and Config.TrustNetworkPolicy
	// is not set, or the factory may not create NetworkPolicies). Specs with
	// Network false are refused with [ErrNetworkUnenforced].
	NetworkUnenforced NetworkMode = iota
	// NetworkLoopbackOnly: the probe pod, under the deny-all NetworkPolicy, had
	// only a loopback interface: pods of this cluster have no network at all.
	NetworkLoopbackOnly
	// NetworkPolicyTrusted: pods have network interfaces, and the deny-all
	// NetworkPolicy is trusted to hold because Config.TrustNetworkPolicy says the
	// network plugin enforces it. The factory has not verified it.
	NetworkPolicyTrusted
)

func (m NetworkMode) String() string {
	switch m {
	case NetworkLoopbackOnly:
		return "loopback-only"
	case NetworkPolicyTrusted:
		return "policy-trusted"
	}
	return "unenforced"
}

// Enforcement says what a Factory's pods are held to, as found at [New].
type Enforcement struct {
	// Network is how Network false is held.
	Network NetworkMode
	// NetworkDetail says why, in a sentence.
	NetworkDetail string
	// Interfaces are the network interfaces the probe pod saw (nil without a
	// probe).
	Interfaces []string
	// NotEnforced lists what a sandbox pod is not held to, in sentences: it is
	// always there, since some of it no pod spec can hold.
	NotEnforced []string
}

// notEnforced is what no pod spec holds; see the package documentation.
func notEnforced(cfg Config) []string {
	out := []string{
		"processes: no per-pod pids limit exists in the pod spec; only the kubelet's node-wide podPidsLimit bounds them",
		"storage: ephemeral-storage is held by the kubelet's eviction after the fact, so a fast writer overshoots it until the kubelet notices",
		"writable root: the container's root file system is writable, as under Docker (only the workspace reaches grading, which runs in a fresh pod)",
	}
	if !cfg.UserNamespaces {
		out = append(out, "user: a task image that runs as root runs as uid 0 of the node (capabilities dropped, no privilege escalation); set Config.UserNamespaces for hostUsers: false")
	}
	if cfg.RuntimeClassName == "" {
		out = append(out, "kernel: commands share the node's kernel (no runtimeClassName such as gVisor or Kata)")
	}
	return out
}

// Enforcement reports what the factory's sandboxes are held to.
func (f *Factory) Enforcement() Enforcement {
	e := f.enforcement
	e.Interfaces = slices.Clone(e.Interfaces)
	e.NotEnforced = slices.Clone(e.NotEnforced)
	return e
}

// probeInterfaces lists /sys/class/net in the probe pod through its helper: the
// probe only reads interface state, it makes no connection.
func probeInterfaces(ctx context.Context, e podproto.Execer) ([]string, error) {
	c, err := podproto.NewClient(e, podproto.Config{Root: "/sys/class/net"})
	if err != nil {
		return nil, err
	}
	ents, err := c.ReadDir(ctx, ".")
	if err != nil {
		return nil, fmt.Errorf("list /sys/class/net in the probe pod: %w", err)
	}
	var names []string
	for _, d := range ents {
		names = append(names, d.Name())
	}
	return names, nil
}

// networkEnforcement decides the network mode from what the probe saw.
func networkEnforcement(cfg Config, ifaces []string, probed bool, policyErr error) (NetworkMode, string) {
	if probed && len(ifaces) > 0 && !slices.ContainsFunc(ifaces, func(s string) bool { return s != "lo" }) {
		return NetworkLoopbackOnly, "the probe pod had only a loopback interface"
	}
	if policyErr != nil {
		return NetworkUnenforced, "the deny-all NetworkPolicy could not be created: " + policyErr.Error()
	}
	seen := "the probe was skipped (Config.SkipNetworkProbe)"
	if probed {
		seen = "the probe pod had interfaces " + strings.Join(ifaces, ", ")
	}
	if cfg.TrustNetworkPolicy {
		return NetworkPolicyTrusted, seen + "; the deny-all NetworkPolicy holds them, as Config.TrustNetworkPolicy says the network plugin enforces it"
	}
	return NetworkUnenforced, seen + ", and whether the network plugin enforces NetworkPolicy cannot be seen from inside a pod; " +
		"set Config.TrustNetworkPolicy if it does (Calico, Cilium and others do; the bridge and flannel plugins do not)"
}
