//go:build tools

// Package tools pins the descheduler command for
// `go build sigs.k8s.io/descheduler/cmd/descheduler`.
package tools

import _ "sigs.k8s.io/descheduler/cmd/descheduler"
