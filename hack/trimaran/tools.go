//go:build tools

// Package tools pins scheduler-plugins' scheduler command for
// `go build sigs.k8s.io/scheduler-plugins/cmd/scheduler`.
package tools

import _ "sigs.k8s.io/scheduler-plugins/cmd/scheduler"
