//go:build !linux

package runner

import "syscall"

// processSysProcAttr: only Linux can kill a child when its parent dies.
func processSysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
