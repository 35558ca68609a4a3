package voteslambda

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ddbpipe/ddbpipe/shared/platform/apigw"
	"github.com/ddbpipe/ddbpipe/shared/platform/jsonerr"
	"github.com/ddbpipe/ddbpipe/shared/votes"
)

// PollStore creates and reads polls, their counts and their materialized
// totals; *votesddb.Votes satisfies it.
type PollStore interface {
	votes.CountReader
	votes.TotalsCache
	votes.RejectReader
	CreatePoll(ctx context.Context, p votes.Poll) error
}

// DefaultMaxAge is how old cached totals may be when a request does not say
// (?maxAge=seconds; 0 reads every shard now).
const DefaultMaxAge = 2 * time.Second

func maxAgeParam(v string) (time.Duration, error) {
	if v == "" {
		return DefaultMaxAge, nil
	}
	n, err := strconv.ParseFloat(v, 64)
	if err != nil || n < 0 || n > 3600 || math.IsNaN(n) {
		return 0, &clientError{http.StatusBadRequest, ReasonBadMaxAge, "maxAge must be a number of seconds from 0 to 3600"}
	}
	return time.Duration(n * float64(time.Second)), nil
}

// limitParam reads ?limit= of GET /polls/{id}/rejects: 1 to
// votes.MaxRejectSample, votes.DefaultRejectSample when absent.
func limitParam(v string) (int, error) {
	if v == "" {
		return votes.DefaultRejectSample, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > votes.MaxRejectSample {
		return 0, &clientError{http.StatusBadRequest, ReasonBadLimit, fmt.Sprintf("limit must be a whole number from 1 to %d", votes.MaxRejectSample)}
	}
	return n, nil
}

// HTTP serves the polls routes of the HTTP API.
type HTTP struct {
	Store         PollStore
	DefaultShards int
	Now           func() time.Time
	Log           *slog.Logger
}

// maxRequestBody bounds a poll definition (100 options of 128 bytes fit easily).
const maxRequestBody = 64 << 10

// PollRequest is the body of POST /polls.
type PollRequest struct {
	PollID          string    `json:"pollId"`
	Options         []string  `json:"options"`
	Shards          *int      `json:"shards"` // omitted: HTTP.DefaultShards
	OneVotePerVoter bool      `json:"oneVotePerVoter"`
	OpensAt         time.Time `json:"opensAt"`
	ClosesAt        time.Time `json:"closesAt"`
}

// pollShape is what POST /polls takes, added to its JSON errors.
const pollShape = `; want {"pollId":"p","options":["a","b"],"shards":8,"oneVotePerVoter":false,"opensAt":"2026-12-01T00:00:00Z","closesAt":"2027-01-01T00:00:00Z"} (only pollId and options required)`

// Reasons are the error codes of the polls routes: every error answers
// {"error":"<reason>","message":"…"} (ErrorBody). Per route:
//
//	POST /polls:               415 unsupported-media-type, 400 missing-body,
//	                           413 too-large, 400 invalid-json, 400 invalid-poll,
//	                           409 poll-exists
//	GET /polls/{id}:           404 unknown-poll
//	GET /polls/{id}/results:   400 bad-max-age, 404 unknown-poll
//	GET /polls/{id}/rejects:   400 bad-limit, 404 unknown-poll
//	any route:                 404 not-found (no such route, on a direct
//	                           invocation), 503 throttled, 500 internal
const (
	ReasonUnsupportedMediaType = "unsupported-media-type"
	ReasonMissingBody          = "missing-body"
	ReasonTooLarge             = "too-large"
	ReasonInvalidJSON          = "invalid-json"
	ReasonInvalidPoll          = "invalid-poll"
	ReasonPollExists           = "poll-exists"
	ReasonUnknownPoll          = "unknown-poll"
	ReasonBadMaxAge            = "bad-max-age"
	ReasonBadLimit             = "bad-limit"
	ReasonNotFound             = "not-found"
	ReasonThrottled            = "throttled"
	ReasonInternal             = "internal"
)

// ErrorBody is every error's body, the objects routes' shape.
type ErrorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

// clientError is a 4xx with a reason and a message the client may see.
type clientError struct {
	status int
	reason string
	msg    string
}

func (e *clientError) Error() string { return e.msg }

// Handle routes one request.
func (h *HTTP) Handle(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	var body any
	var err error
	status := http.StatusOK
	switch req.RouteKey {
	case "GET /health":
		body = map[string]string{"status": "ok", "function": "votes-api"}
	case "POST /polls":
		body, err = h.create(ctx, req)
		status = http.StatusCreated
	case "GET /polls/{id}":
		body, err = h.Store.Poll(ctx, req.PathParameters["id"])
	case "GET /polls/{id}/results":
		var maxAge time.Duration
		if maxAge, err = maxAgeParam(req.QueryStringParameters["maxAge"]); err == nil {
			body, err = votes.CachedResults(ctx, h.Store, h.Store, req.PathParameters["id"], maxAge, h.Now)
		}
	case "GET /polls/{id}/rejects":
		var limit int
		if limit, err = limitParam(req.QueryStringParameters["limit"]); err == nil {
			body, err = votes.ReadRejects(ctx, h.Store, req.PathParameters["id"], limit)
		}
	default:
		err = &clientError{http.StatusNotFound, ReasonNotFound, "no route " + req.RouteKey}
	}
	if err != nil {
		return h.fail(ctx, req, err), nil
	}
	return apigw.JSON(status, body), nil
}

func (h *HTTP) create(ctx context.Context, req events.APIGatewayV2HTTPRequest) (votes.Poll, error) {
	if err := checkJSON(req); err != nil {
		return votes.Poll{}, err
	}
	raw := []byte(req.Body)
	if req.IsBase64Encoded {
		return votes.Poll{}, &clientError{http.StatusUnsupportedMediaType, ReasonUnsupportedMediaType, "send the poll as application/json"}
	}
	if len(raw) == 0 {
		return votes.Poll{}, &clientError{http.StatusBadRequest, ReasonMissingBody, "missing body: want {\"pollId\":...,\"options\":[...]}"}
	}
	if len(raw) > maxRequestBody {
		return votes.Poll{}, &clientError{http.StatusRequestEntityTooLarge, ReasonTooLarge, "poll definition over 64 KiB"}
	}
	var in PollRequest
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return votes.Poll{}, &clientError{http.StatusBadRequest, ReasonInvalidJSON, "malformed poll JSON: " + jsonerr.Describe(err) + pollShape}
	}
	if dec.More() {
		return votes.Poll{}, &clientError{http.StatusBadRequest, ReasonInvalidJSON, "malformed poll JSON: more than one JSON value" + pollShape}
	}
	shards := h.DefaultShards
	if in.Shards != nil {
		if *in.Shards < 1 || *in.Shards > votes.MaxShards {
			return votes.Poll{}, &clientError{http.StatusBadRequest, ReasonInvalidPoll, fmt.Sprintf("shards must be 1 to %d, got %d (omit it for the default, %d)", votes.MaxShards, *in.Shards, h.DefaultShards)}
		}
		shards = *in.Shards
	}
	p := votes.Poll{ID: in.PollID, Options: in.Options, Shards: shards, OneVotePerVoter: in.OneVotePerVoter,
		Opens: in.OpensAt.UTC(), Closes: in.ClosesAt.UTC(), CreatedAt: h.Now().UTC()}
	if in.OpensAt.IsZero() {
		p.Opens = time.Time{}
	}
	if in.ClosesAt.IsZero() {
		p.Closes = time.Time{}
	}
	if err := p.Validate(); err != nil {
		return votes.Poll{}, &clientError{http.StatusBadRequest, ReasonInvalidPoll, strings.ReplaceAll(err.Error(), "votes: ", "")}
	}
	if err := h.Store.CreatePoll(ctx, p); err != nil {
		return votes.Poll{}, err
	}
	return p, nil
}

// checkJSON refuses a body that is not declared application/json
// (parameters such as charset=utf-8 allowed, case-insensitive): 415.
func checkJSON(req events.APIGatewayV2HTTPRequest) error {
	ct := header(req, "content-type")
	if strings.TrimSpace(ct) == "" {
		return &clientError{http.StatusUnsupportedMediaType, ReasonUnsupportedMediaType, "no Content-Type: send the poll as application/json"}
	}
	if mt, _, err := mime.ParseMediaType(ct); err == nil && mt == "application/json" {
		return nil
	}
	if len(ct) > 100 {
		ct = ct[:100] + "…"
	}
	return &clientError{http.StatusUnsupportedMediaType, ReasonUnsupportedMediaType, "Content-Type " + strconv.Quote(ct) + " is not supported: send the poll as application/json"}
}

// header returns a request header's value. API Gateway lower-cases header
// names; a name in another case (a direct invocation) is found too.
func header(req events.APIGatewayV2HTTPRequest, name string) string {
	if v, ok := req.Headers[name]; ok {
		return v
	}
	for k, v := range req.Headers {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}

// fail maps an error to a response: the one place errors become statuses
// and reasons. Internal details are logged, never returned.
func (h *HTTP) fail(ctx context.Context, req events.APIGatewayV2HTTPRequest, err error) events.APIGatewayV2HTTPResponse {
	var ce *clientError
	switch {
	case errors.As(err, &ce):
		return apigw.JSON(ce.status, ErrorBody{Error: ce.reason, Message: ce.msg})
	case errors.Is(err, votes.ErrNoPoll):
		return apigw.JSON(http.StatusNotFound, ErrorBody{Error: ReasonUnknownPoll, Message: "no such poll"})
	case errors.Is(err, votes.ErrPollExists):
		return apigw.JSON(http.StatusConflict, ErrorBody{Error: ReasonPollExists, Message: "a poll with this id exists"})
	case errors.Is(err, votes.ErrThrottled):
		h.Log.WarnContext(ctx, "throttled", "route", req.RouteKey, "err", err)
		return apigw.JSON(http.StatusServiceUnavailable, ErrorBody{Error: ReasonThrottled, Message: "busy, retry shortly"})
	}
	h.Log.ErrorContext(ctx, "request failed", "route", req.RouteKey, "err", err)
	return apigw.JSON(http.StatusInternalServerError, ErrorBody{Error: ReasonInternal, Message: "internal error"})
}
