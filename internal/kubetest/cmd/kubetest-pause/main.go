// Command kubetest-pause is the test cluster's pause program, and the few commands its tests
// run in pods. Built static (CGO_ENABLED=0), it is the whole of the image it is in.
//
//	kubetest-pause                wait for SIGTERM or SIGINT, then exit 0 (the pod sandbox)
//	kubetest-pause echo ARG...    print the arguments
//	kubetest-pause cat FILE...    print the files
//	kubetest-pause sleep SECONDS  sleep
//	kubetest-pause alloc MIB      allocate and touch MIB mebibytes, then wait (a memory limit test)
//	kubetest-pause exit CODE      exit with CODE
package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
		<-sig
		return 0
	}
	cmd, args := args[0], args[1:]
	fail := func(err error) int {
		fmt.Fprintf(stderr, "kubetest-pause %s: %v\n", cmd, err)
		return 1
	}
	number := func() (int, error) {
		if len(args) != 1 {
			return 0, fmt.Errorf("want one number, got %q", args)
		}
		return strconv.Atoi(args[0])
	}
	switch cmd {
	case "echo":
		fmt.Fprintln(stdout, strings.Join(args, " "))
	case "cat":
		for _, name := range args {
			f, err := os.Open(name)
			if err != nil {
				return fail(err)
			}
			_, err = io.Copy(stdout, f)
			f.Close()
			if err != nil {
				return fail(err)
			}
		}
	case "sleep":
		n, err := number()
		if err != nil {
			return fail(err)
		}
		time.Sleep(time.Duration(n) * time.Second)
	case "alloc":
		n, err := number()
		if err != nil {
			return fail(err)
		}
		var held [][]byte
		for i := 0; i < n; i++ {
			b := make([]byte, 1<<20)
			for j := range b {
				b[j] = byte(j)
			}
			held = append(held, b)
		}
		fmt.Fprintf(stdout, "allocated %d MiB\n", len(held))
		select {}
	case "exit":
		n, err := number()
		if err != nil {
			return fail(err)
		}
		return n
	default:
		return fail(fmt.Errorf("unknown command"))
	}
	return 0
}
