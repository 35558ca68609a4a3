package provision

import (
	"fmt"
	"time"

	"github.com/ddbpipe/ddbpipe/local/cfn"
)

// Function is a template function resolved against the local names: what
// the runner needs to set it up and drive its event sources.
type Function struct {
	LogicalID string
	Name      string
	ARN       string
	Timeout   time.Duration
	MemoryMB  int
	Env       map[string]string
	Events    []Event
}

// Event is one resolved event source.
type Event struct {
	Name       string
	Type       string
	Properties map[string]any // resolved: references replaced by local names/ARNs
}

// Functions resolves every function of the template.
func (s *Stack) Functions() ([]Function, error) {
	var out []Function
	for _, f := range s.Template.Functions() {
		phys, ok := s.Resources[f.LogicalID]
		if !ok {
			continue // condition false
		}
		sized, err := s.Template.Resolve(map[string]any{"Timeout": f.Properties["Timeout"], "MemorySize": f.Properties["MemorySize"]}, s.Context)
		if err != nil {
			return nil, fmt.Errorf("provision: %s: %w", f.LogicalID, err)
		}
		resolved := cfn.Function{Properties: obj(sized)}
		fn := Function{
			LogicalID: f.LogicalID, Name: phys.Ref, ARN: phys.Attrs["Arn"],
			Timeout: time.Duration(resolved.Timeout()) * time.Second, MemoryMB: resolved.MemorySize(),
			Env: map[string]string{},
		}
		env, err := s.Template.Resolve(f.Environment(), s.Context)
		if err != nil {
			return nil, fmt.Errorf("provision: %s environment: %w", f.LogicalID, err)
		}
		for k, v := range obj(env) {
			fn.Env[k] = cfn.Scalar(v)
		}
		// Lambda passes the function's LoggingConfig to its runtime as
		// these two variables (JSON logs at the application's level).
		logging, err := s.Template.Resolve(f.Properties["LoggingConfig"], s.Context)
		if err != nil {
			return nil, fmt.Errorf("provision: %s logging config: %w", f.LogicalID, err)
		}
		if lc := obj(logging); cfn.Scalar(lc["LogFormat"]) == "JSON" {
			fn.Env["AWS_LAMBDA_LOG_FORMAT"] = "JSON"
			if lvl := cfn.Scalar(lc["ApplicationLogLevel"]); lvl != "" {
				fn.Env["AWS_LAMBDA_LOG_LEVEL"] = lvl
			}
		}
		for _, e := range f.Events {
			props, err := s.Template.Resolve(e.Properties, s.Context)
			if err != nil {
				return nil, fmt.Errorf("provision: %s event %s: %w", f.LogicalID, e.Name, err)
			}
			fn.Events = append(fn.Events, Event{Name: e.Name, Type: e.Type, Properties: obj(props)})
		}
		out = append(out, fn)
	}
	return out, nil
}
