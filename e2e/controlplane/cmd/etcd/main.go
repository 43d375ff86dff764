// Command etcd is the upstream etcd server, built from Go modules (etcd's own server/main.go
// is exactly this call) for fitgate's e2e control plane.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
