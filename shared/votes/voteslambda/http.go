package voteslambda

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ddbpipe/ddbpipe/shared/platform/apigw"
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
		return 0, apigw.Refuse(apigw.Invalid, ReasonBadMaxAge, "maxAge must be a number of seconds from 0 to 3600")
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
		return 0, apigw.Refuse(apigw.Invalid, ReasonBadLimit, "limit must be a whole number from 1 to %d", votes.MaxRejectSample)
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

// pollBody is what POST /polls takes: a poll definition of at most 64 KiB
// (100 options of 128 bytes fit easily).
var pollBody = apigw.JSONBody{Limit: 64 << 10, Want: `{"pollId":...,"options":[...]}`, Malformed: "malformed poll JSON: %s" + pollShape}

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

// Reasons of the polls routes (apigw.ErrorBody.Error), beside the edge's
// own (apigw.Reason…). Every error answers {"error":"<reason>",
// "message":"…"}. Per route:
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
	ReasonInvalidPoll          = "invalid-poll"
	ReasonPollExists           = "poll-exists"
	ReasonUnknownPoll          = "unknown-poll"
	ReasonBadMaxAge            = "bad-max-age"
	ReasonBadLimit             = "bad-limit"
)

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
		err = apigw.Refuse(apigw.NotFound, apigw.ReasonNotFound, "no route %s", apigw.Clip(req.RouteKey, 128))
	}
	if err != nil {
		return apigw.Fail(ctx, h.Log, req, classify(err)), nil
	}
	return apigw.JSON(status, body), nil
}

func (h *HTTP) create(ctx context.Context, req events.APIGatewayV2HTTPRequest) (votes.Poll, error) {
	if err := checkJSON(req); err != nil {
		return votes.Poll{}, err
	}
	if req.IsBase64Encoded {
		return votes.Poll{}, apigw.Refuse(apigw.UnsupportedMedia, ReasonUnsupportedMediaType, "send the poll as application/json")
	}
	var in PollRequest
	if err := apigw.DecodeJSON(req, &in, pollBody); err != nil {
		return votes.Poll{}, err
	}
	shards := h.DefaultShards
	if in.Shards != nil {
		if *in.Shards < 1 || *in.Shards > votes.MaxShards {
			return votes.Poll{}, apigw.Refuse(apigw.Invalid, ReasonInvalidPoll, "shards must be 1 to %d, got %d (omit it for the default, %d)", votes.MaxShards, *in.Shards, h.DefaultShards)
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
		return votes.Poll{}, apigw.Refuse(apigw.Invalid, ReasonInvalidPoll, "%s", strings.ReplaceAll(err.Error(), "votes: ", ""))
	}
	if err := h.Store.CreatePoll(ctx, p); err != nil {
		return votes.Poll{}, err
	}
	return p, nil
}

// checkJSON refuses a body that is not declared application/json
// (parameters such as charset=utf-8 allowed, case-insensitive): 415.
func checkJSON(req events.APIGatewayV2HTTPRequest) error {
	ct := apigw.Header(req, "content-type")
	if ct == "" {
		return apigw.Refuse(apigw.UnsupportedMedia, ReasonUnsupportedMediaType, "no Content-Type: send the poll as application/json")
	}
	if mt, _, err := mime.ParseMediaType(ct); err == nil && mt == "application/json" {
		return nil
	}
	return apigw.Refuse(apigw.UnsupportedMedia, ReasonUnsupportedMediaType, "Content-Type %s is not supported: send the poll as application/json", strconv.Quote(apigw.Clip(ct, 100)))
}

// classify is the polls routes' error model, the answer each error gets
// (apigw.Fail answers it): the routes' own refusals are *apigw.Error
// already; the polls domain's errors are named here, once; anything else
// is 500 internal, its detail logged and never answered.
func classify(err error) *apigw.Error {
	var ae *apigw.Error
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, votes.ErrNoPoll):
		return apigw.Wrap(apigw.NotFound, ReasonUnknownPoll, "no such poll", err)
	case errors.Is(err, votes.ErrPollExists):
		return apigw.Wrap(apigw.Conflict, ReasonPollExists, "a poll with this id exists", err)
	case errors.Is(err, votes.ErrThrottled):
		return apigw.Wrap(apigw.Unavailable, apigw.ReasonThrottled, "busy, retry shortly", err)
	}
	return apigw.InternalError(err)
}
