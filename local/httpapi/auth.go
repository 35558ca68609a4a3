package httpapi

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// Route authorizers, as the template names them (SAM's HttpApi Auth): a
// route's Authorizer is AuthNone (or ""), AuthIAM, or the name of a JWT
// authorizer given with WithJWTAuthorizer.
const (
	AuthNone = "NONE"
	AuthIAM  = "AWS_IAM"
)

// IAM is what the local API checks SigV4 signatures against: the one
// access key the local servers accept, and the API's region.
type IAM struct {
	AccessKeyID     string
	SecretAccessKey string
	Region          string
	// Judge, when set, decides whether the signer of a correctly signed
	// request may execute-api:Invoke the route's ARN, as API Gateway asks
	// IAM. It also names the other access keys that sign with
	// SecretAccessKey (the local stack's identities).
	Judge InvokeJudge
}

// InvokeJudge authorizes execute-api:Invoke for the local API.
type InvokeJudge interface {
	// Known reports whether accessKey is an identity that signs with the
	// API's secret.
	Known(accessKey string) bool
	// Invoke returns "" when accessKey may invoke resource (the route's
	// execute-api ARN), else IAM's refusal ("User: … is not authorized to
	// perform: execute-api:Invoke on resource: …").
	Invoke(ctx context.Context, accessKey, resource string) (denied string, err error)
}

// errTypeAccessDenied is the x-amzn-ErrorType of an IAM refusal of a signed request.
const errTypeAccessDenied = "AccessDeniedException"

// WithIAM turns on the AWS_IAM authorizer: routes with Authorizer AuthIAM
// need a request signed with SigV4 (service execute-api, the region and the
// key given here).
func WithIAM(iam IAM) Option { return func(c *config) { c.iam = &iam } }

// maxSkew is how far X-Amz-Date may be from the server's clock. API Gateway
// answers "Signature expired: … (… - 5 min.)" past it.
const maxSkew = 5 * time.Minute

// The messages API Gateway answers a refused SigV4 request with (403).
const (
	msgForbidden     = "Forbidden"
	msgBadSignature  = "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details."
	msgUnknownKey    = "The security token included in the request is invalid."
	msgWrongRegion   = "Credential should be scoped to a valid region."
	msgWrongService  = "Credential should be scoped to correct service: 'execute-api'."
	msgMalformedAuth = "Authorization header requires 'Credential' parameter. Authorization header requires 'Signature' parameter. Authorization header requires 'SignedHeaders' parameter. Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header."
)

// authError is a refused request: the status and API Gateway's message.
type authError struct {
	status  int
	message string
	reason  string // for the log only
	denied  bool   // IAM refused the signer (AccessDeniedException)
}

func (e *authError) Error() string { return fmt.Sprintf("httpapi: %s: %s", e.message, e.reason) }

func forbidden(message, reason string) error {
	return &authError{status: http.StatusForbidden, message: message, reason: reason}
}

// errorType is the x-amzn-ErrorType header of a refusal, as AWS sends it
// with each of these messages.
func (e *authError) errorType() string {
	switch {
	case e.denied:
		return errTypeAccessDenied
	case e.status == http.StatusUnauthorized:
		return "UnauthorizedException"
	case e.message == msgForbidden:
		return "ForbiddenException"
	case e.message == msgUnknownKey:
		return "UnrecognizedClientException"
	case e.message == msgMalformedAuth:
		return "IncompleteSignatureException"
	}
	return "InvalidSignatureException"
}

// authorize checks r against the route's authorizer. body is the whole
// request body, already read. It returns what the event's
// requestContext.authorizer carries.
func (s *Server) authorize(r *http.Request, rt *route, body []byte) (*events.APIGatewayV2HTTPRequestContextAuthorizerDescription, error) {
	switch rt.Authorizer {
	case "", AuthNone:
		return nil, nil
	case AuthIAM:
		key, err := s.verifySigV4(r, body)
		if err != nil {
			return nil, err
		}
		if j := s.cfg.iam.Judge; j != nil && key != s.cfg.iam.AccessKeyID {
			res := s.invokeARN(r)
			denied, err := j.Invoke(r.Context(), key, res)
			if err != nil {
				return nil, fmt.Errorf("httpapi: judge execute-api:Invoke on %s: %w", res, err)
			}
			if denied != "" {
				return nil, &authError{status: http.StatusForbidden, message: denied, reason: "IAM denied " + key, denied: true}
			}
		}
		return &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{
				AccessKey: key, AccountID: s.cfg.accountID, CallerID: key,
				UserARN: "arn:aws:iam::" + s.cfg.accountID + ":user/local", UserID: key,
			},
		}, nil
	}
	j := s.cfg.jwt[rt.Authorizer]
	claims, scopes, err := j.verify(r.Context(), r.Header.Get("Authorization"), s.cfg.now())
	if err != nil {
		return nil, err
	}
	return &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
		JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: claims, Scopes: scopes},
	}, nil
}

// sigV4Auth is a parsed "AWS4-HMAC-SHA256 Credential=…, SignedHeaders=…,
// Signature=…" header.
type sigV4Auth struct {
	accessKey, date, region, service string
	signedHeaders                    []string
	signature                        string
}

func parseSigV4(h string) (sigV4Auth, bool) {
	var a sigV4Auth
	rest, ok := strings.CutPrefix(h, "AWS4-HMAC-SHA256 ")
	if !ok {
		return a, false
	}
	for part := range strings.SplitSeq(rest, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return a, false
		}
		switch k {
		case "Credential":
			f := strings.Split(v, "/")
			if len(f) != 5 || f[4] != "aws4_request" || f[0] == "" {
				return a, false
			}
			a.accessKey, a.date, a.region, a.service = f[0], f[1], f[2], f[3]
		case "SignedHeaders":
			a.signedHeaders = strings.Split(v, ";")
		case "Signature":
			a.signature = v
		default:
			return a, false
		}
	}
	if a.accessKey == "" || a.signature == "" || len(a.signedHeaders) == 0 || !slices.Contains(a.signedHeaders, "host") {
		return a, false
	}
	return a, true
}

// verifySigV4 checks r's signature the way API Gateway does: the credential
// scope (key, date, region, execute-api), the clock skew, and the signature
// over the method, path, query, the signed headers and the body's SHA-256 as
// received. It returns the access key.
func (s *Server) verifySigV4(r *http.Request, body []byte) (string, error) {
	iam := s.cfg.iam
	header := r.Header.Get("Authorization")
	if header == "" {
		return "", forbidden(msgForbidden, "no Authorization header")
	}
	a, ok := parseSigV4(header)
	if !ok {
		return "", forbidden(msgMalformedAuth, "malformed Authorization header")
	}
	amzDate := r.Header.Get("X-Amz-Date")
	signedAt, err := time.Parse("20060102T150405Z", amzDate)
	if err != nil {
		return "", forbidden(msgMalformedAuth, "no valid X-Amz-Date")
	}
	switch {
	case a.accessKey != iam.AccessKeyID && (iam.Judge == nil || !iam.Judge.Known(a.accessKey)):
		return "", forbidden(msgUnknownKey, "unknown access key "+a.accessKey)
	case a.region != iam.Region:
		return "", forbidden(msgWrongRegion, "region "+a.region)
	case a.service != "execute-api":
		return "", forbidden(msgWrongService, "service "+a.service)
	case a.date != amzDate[:8]:
		return "", forbidden(msgBadSignature, "credential date "+a.date+" is not X-Amz-Date's")
	}
	now := s.cfg.now().UTC()
	const f = "20060102T150405Z"
	if signedAt.Before(now.Add(-maxSkew)) {
		return "", forbidden(fmt.Sprintf("Signature expired: %s is now earlier than %s (%s - 5 min.)",
			amzDate, now.Add(-maxSkew).Format(f), now.Format(f)), "stale")
	}
	if signedAt.After(now.Add(maxSkew)) {
		return "", forbidden(fmt.Sprintf("Signature not yet current: %s is still later than %s (%s + 5 min.)",
			amzDate, now.Add(maxSkew).Format(f), now.Format(f)), "from the future")
	}

	if err := s.checkSignature(r, a, amzDate, body); err != nil {
		return "", err
	}
	return a.accessKey, nil
}

// checkSignature computes the signature of r as API Gateway canonicalizes
// it (canonical.go) and compares it with a's. The path is tried as SigV4
// normalizes it and, when that differs, as sent (the Go SDK's signer does
// not normalize). A mismatch answers, as AWS does, with the canonical
// request and the string to sign that were expected.
func (s *Server) checkSignature(r *http.Request, a sigV4Auth, amzDate string, body []byte) error {
	rawPath, rawQuery := requestTarget(r)
	sum := sha256.Sum256(body)
	q := &sigV4Request{method: r.Method, rawPath: rawPath, rawQuery: rawQuery, host: r.Host,
		header: r.Header, length: r.ContentLength, payloadHash: hex.EncodeToString(sum[:])}
	signed := make([]string, len(a.signedHeaders))
	for i, h := range a.signedHeaders {
		signed[i] = strings.ToLower(h)
	}
	slices.Sort(signed)
	signed = slices.Compact(signed)
	scope := strings.Join([]string{a.date, a.region, a.service, "aws4_request"}, "/")
	secret := s.cfg.iam.SecretAccessKey

	var want, wantCanonical, wantSTS string
	for i, normalize := range []bool{true, false} {
		path := canonicalURI(rawPath, normalize)
		if i > 0 && path == canonicalURI(rawPath, true) {
			break
		}
		canonical := q.canonicalRequest(path, signed)
		sts := stringToSign(amzDate, scope, canonical)
		sig := signature(secret, a.date, a.region, a.service, sts)
		if hmac.Equal([]byte(sig), []byte(a.signature)) && slices.Equal(signed, a.signedHeaders) {
			return nil
		}
		if i == 0 {
			want, wantCanonical, wantSTS = sig, canonical, sts
		}
	}
	reason := "signature mismatch"
	if want == a.signature {
		reason = "SignedHeaders not lower-case, sorted and distinct"
	}
	return forbidden(msgBadSignature+"\n\nThe Canonical String for this request should have been\n'"+wantCanonical+
		"'\n\nThe String-to-Sign should have been\n'"+wantSTS+"'\n", reason)
}

// invokeARN is the execute-api ARN of r's route as IAM sees it:
// arn:aws:execute-api:<region>:<account>:<api id>/<stage>/<METHOD>/<path>,
// the path as requested (decoded, without its leading slash).
func (s *Server) invokeARN(r *http.Request) string {
	return fmt.Sprintf("arn:aws:execute-api:%s:%s:%s/$default/%s/%s", s.cfg.iam.Region, s.cfg.accountID, s.cfg.apiID,
		r.Method, strings.TrimPrefix(r.URL.Path, "/"))
}

// readBody reads the body up to the event limit (one byte past it tells it
// is too large) and puts it back on r for the event.
func (s *Server) readBody(r *http.Request) ([]byte, error) {
	if r.Body == nil { // a client request handed to ServeHTTP directly
		r.Body = http.NoBody
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(s.cfg.maxEventBytes)+1))
	if err != nil {
		return nil, fmt.Errorf("%w: read body: %w", errBadRequest, err)
	}
	if len(body) > s.cfg.maxEventBytes {
		return nil, fmt.Errorf("%w: body over %d bytes", errEventTooLarge, s.cfg.maxEventBytes)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, nil
}

func asAuthError(err error) (*authError, bool) {
	var e *authError
	ok := errors.As(err, &e)
	return e, ok
}
