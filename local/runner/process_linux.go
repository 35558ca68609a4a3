package runner

import "syscall"

// processSysProcAttr has the kernel kill a function's process when the
// runner dies, so no environment outlives it.
func processSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
