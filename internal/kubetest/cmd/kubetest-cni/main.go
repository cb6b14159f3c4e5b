// Command kubetest-cni is the test cluster's CNI plugin: a pod gets no network at all. It
// creates nothing; its ADD result names an eth0 with the address 127.0.0.1/8 because
// containerd 1.6 fails a pod sandbox whose result has no address on eth0 ("failed to find
// network info for sandbox"), which the loopback plugin's result never has. The pod's only
// interface is lo, brought up by the loopback network containerd adds of its own, so its
// "IP" 127.0.0.1 is its own loopback: nothing outside the pod reaches it, and nothing in it
// reaches out.
//
// It speaks the CNI protocol of the spec's versions 0.3.0 to 0.4.0: the command in
// CNI_COMMAND, the network configuration on standard input, the result on standard output.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
)

func main() {
	if err := run(os.Getenv("CNI_COMMAND"), os.Getenv("CNI_NETNS"), os.Stdin, os.Stdout); err != nil {
		json.NewEncoder(os.Stdout).Encode(map[string]any{"cniVersion": "0.4.0", "code": 100, "msg": err.Error()})
		os.Exit(1)
	}
}

var versions = []string{"0.3.0", "0.3.1", "0.4.0"}

func run(command, netns string, stdin io.Reader, stdout io.Writer) error {
	if command == "VERSION" {
		return json.NewEncoder(stdout).Encode(map[string]any{"cniVersion": "0.4.0", "supportedVersions": versions})
	}
	var conf struct {
		CNIVersion string `json:"cniVersion"`
	}
	if err := json.NewDecoder(stdin).Decode(&conf); err != nil {
		return fmt.Errorf("kubetest-cni: reading the network configuration: %w", err)
	}
	switch command {
	case "ADD":
		type iface struct {
			Name    string `json:"name"`
			Sandbox string `json:"sandbox"`
		}
		type ip struct {
			Version   string `json:"version"`
			Interface int    `json:"interface"`
			Address   string `json:"address"`
		}
		return json.NewEncoder(stdout).Encode(struct {
			CNIVersion string  `json:"cniVersion"`
			Interfaces []iface `json:"interfaces"`
			IPs        []ip    `json:"ips"`
		}{conf.CNIVersion, []iface{{"eth0", netns}}, []ip{{"4", 0, "127.0.0.1/8"}}})
	case "DEL", "CHECK":
		return nil
	default:
		return fmt.Errorf("kubetest-cni: unknown CNI_COMMAND %q", command)
	}
}
