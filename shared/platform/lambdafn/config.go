package lambdafn

import (
	"fmt"
	"strconv"
	"strings"
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
