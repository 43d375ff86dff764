// The CNCF distribution registry (github.com/distribution/distribution/v3) with only the storage drivers the
// e2e tests use: its own cmd/registry/main.go v3.1.2 also links the Azure, GCS and S3 drivers (their SDKs
// are most of a cold build), which a registry on 127.0.0.1 with a temporary filesystem store never touches.
// Source: github.com/distribution/distribution v3.1.2 cmd/registry/main.go.
package main

import (
	"github.com/distribution/distribution/v3/registry"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory"
)

func main() {
	// registry.RootCmd is upstream's command (serve, garbage-collect); it exits non-zero on failure itself.
	_ = registry.RootCmd.Execute()
}
