package servers

import "syscall"

// serverSysProcAttr puts a server in its own process group and has the
// kernel kill it if we die without calling Stop. (Pdeathsig fires when the
// OS thread that started the child exits; Go keeps its threads for the
// life of the process unless a goroutine exits while locked to one, which
// this package never does.)
func serverSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
