//go:build tools

// Package tools pins the helm-unittest command so `go mod tidy` keeps its
// dependencies in this module; scripts/install-helm.sh builds it from here.
package tools

import _ "github.com/helm-unittest/helm-unittest/cmd/helm-unittest"
