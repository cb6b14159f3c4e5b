package kubetest_test

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// machine is what a cluster may change on the machine and down must put back.
type machine struct {
	sysctls  map[string]string // /proc/sys, less the counters that move by themselves
	iptables string            // iptables -S and ip6tables -S of every table the kubelet or CNI use
	mounts   []string          // mount points
	links    []string          // network interfaces
	procs    []string          // processes of the cluster's programs, "pid comm"
	paths    []string          // the machine paths a kubelet or containerd create, that exist
	cgroups  []string          // kubepods cgroups
}

// volatile are the /proc/sys entries that change without anyone setting them.
var volatile = []string{"fs/dentry-state", "fs/file-nr", "fs/inode-nr", "fs/inode-state", "fs/quota/",
	"kernel/ns_last_pid", "kernel/random/", "kernel/pty/nr", "net/netfilter/nf_conntrack_count"}

// clusterPrograms are the comm names of the cluster's processes.
var clusterPrograms = []string{"etcd", "containerd", "containerd-shim", "kube-apiserver", "kube-controller", "kube-scheduler", "kubelet", "pause", "kubetest-pause", "tool"}

var machinePaths = []string{"/var/lib/kubelet", "/var/lib/cni", "/run/containerd", "/run/netns", "/var/log/containers",
	"/var/log/pods", "/var/lib/containerd", "/opt/containerd", "/etc/cni", "/opt/cni", "/etc/kubernetes", "/run/runc"}

func snapshot() (*machine, error) {
	m := &machine{sysctls: map[string]string{}}
	var errs []error
	filepath.WalkDir("/proc/sys", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		key := strings.TrimPrefix(path, "/proc/sys/")
		for _, v := range volatile {
			if strings.HasPrefix(key, v) {
				return nil
			}
		}
		if info, err := d.Info(); err != nil || info.Mode().Perm()&0o444 == 0 {
			return nil
		}
		if b, err := os.ReadFile(path); err == nil {
			m.sysctls[key] = string(b)
		}
		return nil
	})
	for _, ipt := range []string{"iptables", "ip6tables"} {
		for _, table := range []string{"filter", "nat", "mangle"} {
			out, err := exec.Command(ipt, "-w", "-t", table, "-S").CombinedOutput()
			if err != nil {
				errs = append(errs, fmt.Errorf("%s -t %s -S: %v: %s", ipt, table, err, out))
			}
			m.iptables += fmt.Sprintf("# %s %s\n%s", ipt, table, out)
		}
	}
	if b, err := os.ReadFile("/proc/self/mountinfo"); err != nil {
		errs = append(errs, err)
	} else {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) > 4 {
				m.mounts = append(m.mounts, f[4])
			}
		}
	}
	ifs, err := net.Interfaces()
	errs = append(errs, err)
	for _, i := range ifs {
		m.links = append(m.links, i.Name)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/comm")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		comm := strings.TrimSpace(string(b))
		if err == nil && slices.ContainsFunc(clusterPrograms, func(c string) bool { return strings.HasPrefix(comm, c) }) {
			m.procs = append(m.procs, strings.Split(p, "/")[2]+" "+comm)
		}
	}
	for _, p := range machinePaths {
		if _, err := os.Lstat(p); err == nil {
			m.paths = append(m.paths, p)
		}
	}
	m.cgroups, _ = filepath.Glob("/sys/fs/cgroup/*/kubepods")
	return m, errors.Join(errs...)
}

// diff says how after differs from m in what the cluster could have changed: its work
// directory's mounts, processes, interfaces, iptables rules, sysctls, machine paths and
// cgroups.
func (m *machine) diff(after *machine, work string) error {
	var errs []error
	for k, v := range m.sysctls {
		if w, ok := after.sysctls[k]; ok && w != v {
			errs = append(errs, fmt.Errorf("sysctl %s: %q before, %q after", k, strings.TrimSpace(v), strings.TrimSpace(w)))
		}
	}
	if m.iptables != after.iptables {
		errs = append(errs, fmt.Errorf("iptables rules before:\n%s\nafter:\n%s", m.iptables, after.iptables))
	}
	for _, mp := range added(m.mounts, after.mounts) {
		errs = append(errs, fmt.Errorf("mount %s added", mp))
	}
	for _, mp := range after.mounts {
		if strings.HasPrefix(mp, work+"/") {
			errs = append(errs, fmt.Errorf("mount %s under the work directory", mp))
		}
	}
	for _, l := range added(m.links, after.links) {
		errs = append(errs, fmt.Errorf("network interface %s added", l))
	}
	for _, p := range added(m.procs, after.procs) {
		errs = append(errs, fmt.Errorf("process %s left", p))
	}
	if !slices.Equal(m.paths, after.paths) {
		errs = append(errs, fmt.Errorf("machine paths: %q before, %q after", m.paths, after.paths))
	}
	for _, c := range after.cgroups {
		errs = append(errs, fmt.Errorf("cgroup %s left", c))
	}
	return errors.Join(errs...)
}

func added(before, after []string) []string {
	var a []string
	for _, s := range after {
		if !slices.Contains(before, s) {
			a = append(a, s)
		}
	}
	return a
}
