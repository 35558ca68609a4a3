package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Lambda API emulation: the subset of Lambda's REST API that ddbpipe uses —
// Invoke, and CreateEventSourceMapping / ListEventSourceMappings /
// GetEventSourceMapping / DeleteEventSourceMapping for DynamoDB streams and
// SQS queues — so code that subscribes a new table's stream through the
// Lambda SDK client (AWS_ENDPOINT_URL_LAMBDA) runs unchanged locally.

// Wiring is what mappings created through the Lambda API are served with.
type Wiring struct {
	Streams  StreamsAPI
	SQS      SQSAPI
	QueueURL func(arn string) (string, bool) // queue ARN → URL
	// ClientsFor, when set, gives the clients a function's mappings poll
	// and report failures with (as Lambda does with the function's
	// execution role), instead of Streams and SQS.
	ClientsFor func(logicalID string) (StreamsAPI, SQSAPI)
}

// SetWiring provides the clients for mappings created at run time.
func (r *Runner) SetWiring(w Wiring) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.wiring = w
}

// ESM is an event source mapping configuration as the Lambda API returns it.
type ESM struct {
	UUID                           string          `json:"UUID"`
	FunctionArn                    string          `json:"FunctionArn"`
	EventSourceArn                 string          `json:"EventSourceArn"`
	StartingPosition               string          `json:"StartingPosition,omitempty"`
	BatchSize                      int             `json:"BatchSize"`
	MaximumBatchingWindowInSeconds int             `json:"MaximumBatchingWindowInSeconds"`
	BisectBatchOnFunctionError     bool            `json:"BisectBatchOnFunctionError,omitempty"`
	MaximumRetryAttempts           *int            `json:"MaximumRetryAttempts,omitempty"`
	MaximumRecordAgeInSeconds      *int            `json:"MaximumRecordAgeInSeconds,omitempty"`
	FunctionResponseTypes          []string        `json:"FunctionResponseTypes,omitempty"`
	TumblingWindowInSeconds        int             `json:"TumblingWindowInSeconds,omitempty"`
	ParallelizationFactor          int             `json:"ParallelizationFactor,omitempty"`
	DestinationConfig              json.RawMessage `json:"DestinationConfig,omitempty"`
	FilterCriteria                 *FilterCriteria `json:"FilterCriteria,omitempty"`
	State                          string          `json:"State"`
	LastModified                   float64         `json:"LastModified"`
}

// FilterCriteria is an event source mapping's filters, as Lambda's API has them.
type FilterCriteria struct {
	Filters []struct {
		Pattern string `json:"Pattern"`
	} `json:"Filters"`
}

// Patterns lists the filters' patterns.
func (c *FilterCriteria) Patterns() []string {
	if c == nil {
		return nil
	}
	var out []string
	for _, f := range c.Filters {
		out = append(out, f.Pattern)
	}
	return out
}

type esmRequest struct {
	ESM
	FunctionName string `json:"FunctionName"`
	Enabled      *bool  `json:"Enabled"`
}

// CreateMapping subscribes a function to a DynamoDB stream or SQS queue by
// ARN, as Lambda's CreateEventSourceMapping does.
func (r *Runner) CreateMapping(ctx context.Context, in esmRequest) (ESM, error) {
	f, err := r.Function(in.FunctionName)
	if err != nil {
		return ESM{}, err
	}
	r.mu.Lock()
	w := r.wiring
	r.mu.Unlock()
	if w.ClientsFor != nil {
		w.Streams, w.SQS = w.ClientsFor(f.LogicalID)
	}
	e := in.ESM
	e.UUID = newID()
	e.FunctionArn = f.ARN
	e.State = "Enabled"
	e.LastModified = float64(time.Now().Unix())
	partial := false
	for _, t := range e.FunctionResponseTypes {
		partial = partial || t == "ReportBatchItemFailures"
	}
	switch {
	case strings.Contains(e.EventSourceArn, ":dynamodb:") && strings.Contains(e.EventSourceArn, "/stream/"):
		if w.Streams == nil {
			return ESM{}, errors.New("runner: no streams client for run-time mappings")
		}
		// Lambda keeps one mapping of a function and a stream: a second
		// is refused (two rotations at once both subscribing a new month).
		if !r.reserveMapping(e) {
			return ESM{}, fmt.Errorf("%w: the event source arn (%s) and function (%s) provided mapping already exists", ErrMappingExists, e.EventSourceArn, f.Name)
		}
		reserved := true
		defer func() {
			if reserved {
				r.mu.Lock()
				delete(r.esms, e.UUID)
				r.mu.Unlock()
			}
		}()
		m := StreamMapping{
			ID: e.UUID, Function: f.LogicalID, StreamARN: e.EventSourceArn, StartingPosition: e.StartingPosition,
			BatchSize: e.BatchSize, Window: time.Duration(e.MaximumBatchingWindowInSeconds) * time.Second,
			ReportBatchItemFailures: partial, Bisect: e.BisectBatchOnFunctionError, MaxRetryAttempts: -1,
			TumblingWindow:  time.Duration(e.TumblingWindowInSeconds) * time.Second,
			Parallelization: e.ParallelizationFactor, // AddStream refuses one outside 1–10
		}
		if e.ParallelizationFactor == 0 {
			e.ParallelizationFactor, m.Parallelization = 1, 1 // Lambda answers 1 when it was not given
		}
		if e.MaximumRetryAttempts != nil {
			m.MaxRetryAttempts = *e.MaximumRetryAttempts
		}
		if m.Filter, err = ParseFilter(e.FilterCriteria.Patterns()); err != nil {
			return ESM{}, err
		}
		if e.MaximumRecordAgeInSeconds != nil && *e.MaximumRecordAgeInSeconds > 0 {
			m.MaxRecordAge = time.Duration(*e.MaximumRecordAgeInSeconds) * time.Second
		}
		var dc struct{ OnFailure struct{ Destination string } }
		if len(e.DestinationConfig) > 0 && json.Unmarshal(e.DestinationConfig, &dc) == nil && dc.OnFailure.Destination != "" {
			url, ok := w.QueueURL(dc.OnFailure.Destination)
			if !ok {
				return ESM{}, fmt.Errorf("runner: on-failure destination %s is not a known queue", dc.OnFailure.Destination)
			}
			m.OnFailureQueueURL = url
		}
		if _, err := r.AddStream(w.Streams, w.SQS, m); err != nil {
			return ESM{}, err
		}
		reserved = false
	case strings.Contains(e.EventSourceArn, ":sqs:"):
		url, ok := w.QueueURL(e.EventSourceArn)
		if !ok || w.SQS == nil {
			return ESM{}, fmt.Errorf("runner: queue %s is not known", e.EventSourceArn)
		}
		if _, err := r.AddSQS(w.SQS, SQSMapping{
			ID: e.UUID, Function: f.LogicalID, QueueURL: url, QueueARN: e.EventSourceArn, BatchSize: e.BatchSize,
			Window: time.Duration(e.MaximumBatchingWindowInSeconds) * time.Second, ReportBatchItemFailures: partial,
		}); err != nil {
			return ESM{}, err
		}
	default:
		return ESM{}, fmt.Errorf("runner: event source %q is not a DynamoDB stream or SQS queue", e.EventSourceArn)
	}
	r.mu.Lock()
	r.esms[e.UUID] = e
	r.mu.Unlock()
	return e, nil
}

// ErrMappingExists: the function has a mapping of the stream already
// (Lambda's ResourceConflictException).
var ErrMappingExists = errors.New("runner: mapping exists")

// reserveMapping records e unless its function has a mapping of its
// stream already; false when it has.
func (r *Runner) reserveMapping(e ESM) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, o := range r.esms {
		if o.FunctionArn == e.FunctionArn && o.EventSourceArn == e.EventSourceArn {
			return false
		}
	}
	r.esms[e.UUID] = e
	return true
}

// MappingFunction returns the function ARN of a mapping created through the
// Lambda API, by its UUID.
func (r *Runner) MappingFunction(uuid string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.esms[uuid]
	return e.FunctionArn, ok
}

// LambdaAPI serves the Lambda API subset over HTTP.
func (r *Runner) LambdaAPI() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /2015-03-31/functions/{name}/invocations", r.serveInvoke)
	create := func(w http.ResponseWriter, req *http.Request) {
		var in esmRequest
		if err := json.NewDecoder(io.LimitReader(req.Body, 1<<20)).Decode(&in); err != nil {
			lambdaError(w, http.StatusBadRequest, "InvalidParameterValueException", "request body: "+err.Error())
			return
		}
		e, err := r.CreateMapping(req.Context(), in)
		if err != nil {
			status, code := http.StatusBadRequest, "InvalidParameterValueException"
			switch {
			case errors.Is(err, ErrUnknownFunction):
				status, code = http.StatusNotFound, "ResourceNotFoundException"
			case errors.Is(err, ErrMappingExists):
				status, code = http.StatusConflict, "ResourceConflictException"
			}
			lambdaError(w, status, code, err.Error())
			return
		}
		writeJSON(w, http.StatusAccepted, e)
	}
	list := func(w http.ResponseWriter, req *http.Request) {
		fn, src := req.URL.Query().Get("FunctionName"), req.URL.Query().Get("EventSourceArn")
		var arn string
		if fn != "" {
			f, err := r.Function(fn)
			if err != nil {
				lambdaError(w, http.StatusNotFound, "ResourceNotFoundException", err.Error())
				return
			}
			arn = f.ARN
		}
		list := []ESM{}
		r.mu.Lock()
		for _, e := range r.esms {
			if (arn == "" || e.FunctionArn == arn) && (src == "" || e.EventSourceArn == src) {
				list = append(list, e)
			}
		}
		r.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"EventSourceMappings": list})
	}
	// The SDK sends the collection path with or without its trailing slash.
	mux.HandleFunc("POST /2015-03-31/event-source-mappings", create)
	mux.HandleFunc("POST /2015-03-31/event-source-mappings/{$}", create)
	mux.HandleFunc("GET /2015-03-31/event-source-mappings", list)
	mux.HandleFunc("GET /2015-03-31/event-source-mappings/{$}", list)
	mux.HandleFunc("GET /2015-03-31/event-source-mappings/{uuid}", func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		e, ok := r.esms[req.PathValue("uuid")]
		r.mu.Unlock()
		if !ok {
			lambdaError(w, http.StatusNotFound, "ResourceNotFoundException", "no event source mapping "+req.PathValue("uuid"))
			return
		}
		writeJSON(w, http.StatusOK, e)
	})
	mux.HandleFunc("DELETE /2015-03-31/event-source-mappings/{uuid}", func(w http.ResponseWriter, req *http.Request) {
		id := req.PathValue("uuid")
		r.mu.Lock()
		e, ok := r.esms[id]
		delete(r.esms, id)
		r.mu.Unlock()
		if !ok {
			lambdaError(w, http.StatusNotFound, "ResourceNotFoundException", "no event source mapping "+id)
			return
		}
		_ = r.Remove(id)
		e.State = "Deleting"
		writeJSON(w, http.StatusAccepted, e)
	})
	return mux
}

func (r *Runner) serveInvoke(w http.ResponseWriter, req *http.Request) {
	name := req.PathValue("name")
	if _, err := r.Function(name); err != nil {
		lambdaError(w, http.StatusNotFound, "ResourceNotFoundException", "Function not found: "+name)
		return
	}
	payload, err := io.ReadAll(io.LimitReader(req.Body, 6<<20+1))
	if err != nil {
		lambdaError(w, http.StatusBadRequest, "InvalidRequestContentException", err.Error())
		return
	}
	if len(payload) > 6<<20 {
		lambdaError(w, http.StatusRequestEntityTooLarge, "RequestTooLargeException", "Request must be smaller than 6291456 bytes for the InvokeFunction operation")
		return
	}
	if len(payload) == 0 {
		payload = []byte("{}")
	}
	if req.Header.Get("X-Amz-Invocation-Type") == "Event" {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			if err := r.invokeAsync(context.WithoutCancel(req.Context()), name, payload); err != nil {
				r.log.Error("asynchronous invocation failed after retries", "function", name, "err", err)
			}
		}()
		w.WriteHeader(http.StatusAccepted)
		return
	}
	out, err := r.Invoke(req.Context(), name, payload)
	w.Header().Set("X-Amz-Executed-Version", "$LATEST")
	if err != nil {
		w.Header().Set("X-Amz-Function-Error", "Unhandled")
		writeJSON(w, http.StatusOK, map[string]string{"errorMessage": err.Error(), "errorType": fmt.Sprintf("%T", err)})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
}

func lambdaError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("X-Amzn-ErrorType", code)
	writeJSON(w, status, map[string]string{"Type": "User", "message": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
