package lambdafn

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Vars reads typed settings from a function's environment and collects every
// problem, so a misconfigured function reports all of them at once.
type Vars struct {
	getenv func(string) string
	errs   []string
}

// NewVars reads from getenv.
func NewVars(getenv func(string) string) *Vars { return &Vars{getenv: getenv} }

// String returns a required, non-empty variable.
func (v *Vars) String(name string) string {
	s := strings.TrimSpace(v.getenv(name))
	if s == "" {
		v.errs = append(v.errs, name+" is not set")
	}
	return s
}

// Int returns a required integer variable within [min, max].
func (v *Vars) Int(name string, min, max int) int {
	s := v.String(name)
	if s == "" {
		return 0
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < min || n > max {
		v.errs = append(v.errs, fmt.Sprintf("%s=%q is not an integer in [%d, %d]", name, s, min, max))
	}
	return n
}

// OneOf returns a required variable that must be one of the allowed values.
func (v *Vars) OneOf(name string, allowed ...string) string {
	s := v.String(name)
	if s == "" {
		return ""
	}
	for _, a := range allowed {
		if s == a {
			return s
		}
	}
	v.errs = append(v.errs, fmt.Sprintf("%s=%q is not one of %s", name, s, strings.Join(allowed, ", ")))
	return s
}

// Err reports every problem found so far.
func (v *Vars) Err() error {
	if len(v.errs) == 0 {
		return nil
	}
	return fmt.Errorf("lambdafn: configuration: %s", strings.Join(v.errs, "; "))
}

// ClockFileVar names a file that moves a function's clock: it holds a Go
// duration (such as -720h) added to the time of day, read again at every
// reading of the clock, so a rehearsal moves every function's clock at
// once. It is for rehearsals only: the local stack's tests and soak set it
// to run a month's turn within minutes; the template never does, so in AWS
// every function runs on the real clock.
const ClockFileVar = "DDBPIPE_CLOCK_FILE"

// Clock returns the function's clock: time.Now, moved by the offset in
// ClockFileVar's file when it is set. A file that cannot be read when the
// function starts is a configuration error; later, the last offset read
// stays in force.
func (v *Vars) Clock() func() time.Time {
	path := strings.TrimSpace(v.getenv(ClockFileVar))
	if path == "" {
		return time.Now
	}
	d, err := ReadClockOffset(path)
	if err != nil {
		v.errs = append(v.errs, fmt.Sprintf("%s: %v", ClockFileVar, err))
		return time.Now
	}
	var last atomic.Int64
	last.Store(int64(d))
	return func() time.Time {
		if d, err := ReadClockOffset(path); err == nil {
			last.Store(int64(d))
		}
		return time.Now().Add(time.Duration(last.Load()))
	}
}

// ReadClockOffset reads a clock file: one Go duration.
func ReadClockOffset(path string) (time.Duration, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	d, err := time.ParseDuration(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("clock file %s: %q is not a duration", path, strings.TrimSpace(string(b)))
	}
	return d, nil
}

// WriteClockOffset replaces a clock file's offset at once (a reader sees
// the old offset or the new one, never part of a write).
func WriteClockOffset(path string, d time.Duration) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(d.String()+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
