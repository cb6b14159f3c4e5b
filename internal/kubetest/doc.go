// Package kubetest gives tests a real single-node Kubernetes cluster on this machine: etcd,
// containerd, runc and the CNI loopback plugin from Debian; kube-apiserver,
// kube-controller-manager, kube-scheduler, the kubelet and kubectl built from source through
// the machine's GOPROXY by the scripts in cluster/ (cached after the first build). Everything
// listens on 127.0.0.1, pods have no network but their own loopback, and images come from
// no registry: they are imported into the node's containerd under local names
// ([Env.ImportImage]) and run with imagePullPolicy Never.
//
// [Cluster] skips the test unless it runs as root (a kubelet needs it) and AGENTICOPD_KUBE is
// not "off". Otherwise the first call in a test process builds and starts the cluster, and
// later calls return the same [Env]; a cluster already started by hand with cluster.sh up is
// used as it is and left running. One cluster runs per machine: a process holds the machine
// lock from its first [Cluster] until [Down], so test processes of several packages take
// turns.
//
// A cluster a test process started is stopped, and every change it made to the machine undone,
// by [Down], which [Main] calls after the tests; and, should the process end without it (a
// panic, a timeout, SIGKILL), by a guard process that runs cluster.sh down when the test
// process's end closes its pipe. Use it from TestMain:
//
//	func TestMain(m *testing.M) { kubetest.Main(m) }
//
//	func TestPods(t *testing.T) {
//		env := kubetest.Cluster(t)
//		cs := kubernetes.NewForConfigOrDie(env.Config)
//		...
//	}
package kubetest
