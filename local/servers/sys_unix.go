//go:build unix && !linux

package servers

import "syscall"

// serverSysProcAttr puts a server in its own process group. Only Linux can
// also kill it when we die without calling Stop.
func serverSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
