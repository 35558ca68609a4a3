package runner

import (
	"bytes"
	"io"
)

// lines passes one process's output on in whole lines: each Write to the
// shared writer is one or more complete lines, so the lines of processes
// writing at once never mix and a reader may parse the output line by
// line. What follows the last newline waits for the next one, or for
// flush when the process has exited.
type lines struct {
	out  io.Writer
	tail []byte
}

func (l *lines) Write(p []byte) (int, error) {
	end := bytes.LastIndexByte(p, '\n')
	if end < 0 {
		l.tail = append(l.tail, p...)
		return len(p), nil
	}
	whole := p[:end+1]
	if len(l.tail) > 0 {
		whole = append(l.tail, whole...)
	}
	_, err := l.out.Write(whole)
	l.tail = append(l.tail[:0], p[end+1:]...)
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// flush writes what is left after the last newline, ended by one.
func (l *lines) flush() {
	if len(l.tail) > 0 {
		_, _ = l.out.Write(append(l.tail, '\n'))
		l.tail = nil
	}
}
