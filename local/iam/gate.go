package iam

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/ddbpipe/ddbpipe/local/faultproxy"
)

// ProxyAuthorizer judges the requests a local proxy of svc receives. An S3
// request it allows, signed by an identity other than the admin, is handed
// on signed as the admin (secret: the admin's), since the S3 server knows
// the admin's key only. log receives judge failures (nil: discarded).
func (j *Judge) ProxyAuthorizer(svc Service, secret string, log *slog.Logger) faultproxy.Authorizer {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return func(r *http.Request, _ faultproxy.Operation, body []byte) *faultproxy.Denial {
		key := SigningKey(r)
		calls, err := Map(FromHTTP(svc, r, body), j.place)
		if err != nil {
			log.Warn("iam: request not judged", "service", svc, "err", err)
			return &faultproxy.Denial{Message: "the local IAM judge cannot tell what this request does: " + err.Error()}
		}
		d, err := j.Authorize(r.Context(), key, calls)
		if err != nil {
			log.Error("iam: judge", "service", svc, "err", err)
			return &faultproxy.Denial{Message: err.Error()}
		}
		if !d.Allowed() {
			log.Info("iam: denied", "identity", d.Identity, "action", d.Denied.Action, "resource", d.Denied.Resource, "reason", d.Reason)
			return &faultproxy.Denial{Message: d.Message()}
		}
		if svc == S3 && key != "" && key != j.adminKey {
			if err := resignAs(r, j.adminKey, secret); err != nil {
				log.Error("iam: re-sign S3 request", "err", err)
				return &faultproxy.Denial{Message: "the local IAM judge could not hand the request on: " + err.Error()}
			}
		}
		return nil
	}
}

// resignAs makes r signed by accessKey. A header-signed request only names
// the key in its Authorization header (the signature does not cover the
// key, and every identity signs with the admin's secret); a presigned URL's
// query names it in the signed part, so it is signed again.
func resignAs(r *http.Request, accessKey, secret string) error {
	if auth := r.Header.Get("Authorization"); auth != "" {
		r.Header.Set("Authorization", credentialRE.ReplaceAllString(auth, "Credential="+accessKey+"/"))
		return nil
	}
	q := r.URL.Query()
	scope := strings.Split(q.Get("X-Amz-Credential"), "/")
	if len(scope) != 5 {
		return fmt.Errorf("presigned URL credential %q", q.Get("X-Amz-Credential"))
	}
	when, err := time.Parse("20060102T150405Z", q.Get("X-Amz-Date"))
	if err != nil {
		return fmt.Errorf("presigned URL date: %w", err)
	}
	signed := strings.Split(q.Get("X-Amz-SignedHeaders"), ";")
	for _, k := range []string{"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-SignedHeaders", "X-Amz-Signature"} {
		q.Del(k)
	}
	u := *r.URL
	u.Scheme, u.Host = "http", r.Host
	u.RawQuery = q.Encode()
	out, err := http.NewRequest(r.Method, u.String(), nil)
	if err != nil {
		return err
	}
	out.URL.RawPath = r.URL.RawPath
	out.URL.Path = r.URL.Path
	out.Host = r.Host
	for _, h := range signed {
		if h == "host" || h == "" {
			continue
		}
		out.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
	}
	creds := aws.Credentials{AccessKeyID: accessKey, SecretAccessKey: secret}
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	signedURL, _, err := signer.PresignHTTP(context.Background(), creds, out, "UNSIGNED-PAYLOAD", scope[3], scope[2], when)
	if err != nil {
		return fmt.Errorf("presign: %w", err)
	}
	nu, err := url.Parse(signedURL)
	if err != nil {
		return err
	}
	r.URL.RawQuery = nu.RawQuery
	return nil
}

// LambdaGate judges the requests to the local Lambda API before h serves
// them; a denied one gets Lambda's AccessDeniedException (403).
func (j *Judge) LambdaGate(h http.Handler, mappings MappingFunction, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
		if err != nil {
			http.Error(w, "cannot read request body", http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		calls, err := MapLambda(FromHTTP(Lambda, r, body), j.place, mappings)
		var d Decision
		if err == nil {
			d, err = j.Authorize(r.Context(), SigningKey(r), calls)
		}
		msg := ""
		switch {
		case err != nil:
			msg = "the local IAM judge: " + err.Error()
		case !d.Allowed():
			msg = d.Message()
			log.Info("iam: denied", "identity", d.Identity, "action", d.Denied.Action, "resource", d.Denied.Resource, "reason", d.Reason)
		}
		if msg != "" {
			b, _ := json.Marshal(map[string]string{"Type": "User", "message": msg})
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Amzn-Errortype", "AccessDeniedException")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write(b)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Known reports whether accessKey is one of the stack's identities other
// than the admin (they sign with the admin's secret).
func (j *Judge) Known(accessKey string) bool {
	_, ok := j.byKey[accessKey]
	return ok
}

// Invoke judges execute-api:Invoke on resource (a route's ARN) for the
// signer of a request to the local HTTP API: "" when allowed, else the
// refusal as IAM words it. It makes *Judge the local API's
// httpapi.InvokeJudge.
func (j *Judge) Invoke(ctx context.Context, accessKey, resource string) (string, error) {
	d, err := j.Authorize(ctx, accessKey, []Call{{Action: "execute-api:Invoke", Resource: resource}})
	if err != nil {
		return "", err
	}
	return d.Message(), nil
}

// OpenSearchGate judges the requests to the local search proxy before h
// serves them; a denied one gets the answer OpenSearch Service gives a
// request the domain's IAM policies refuse (WriteOpenSearchDenial). It
// reads no body: the service authorizes by method and path alone.
func (j *Judge) OpenSearchGate(h http.Handler, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls, err := Map(FromHTTP(OpenSearch, r, nil), j.place)
		var d Decision
		if err == nil {
			d, err = j.Authorize(r.Context(), SigningKey(r), calls)
		}
		switch {
		case err != nil:
			log.Warn("iam: search request not judged", "method", r.Method, "path", r.URL.Path, "err", err)
			WriteOpenSearchDenial(w, "the local IAM judge: "+err.Error())
		case !d.Allowed():
			log.Info("iam: denied", "identity", d.Identity, "action", d.Denied.Action, "resource", d.Denied.Resource, "reason", d.Reason)
			WriteOpenSearchDenial(w, d.Message())
		default:
			h.ServeHTTP(w, r)
		}
	})
}

// WriteOpenSearchDenial answers as OpenSearch Service does when a domain
// without fine-grained access control refuses a signed request: 403 with
// {"Message": "User: <principal> is not authorized to perform:
// es:ESHttp<Method> ..."}. (The security plugin's security_exception is
// fine-grained access control's, which the template's domain does not
// use.) The judge's words also name the resource, as for every service.
func WriteOpenSearchDenial(w http.ResponseWriter, msg string) {
	b, _ := json.Marshal(struct {
		Message string `json:"Message"`
	}{msg})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusForbidden)
	_, _ = w.Write(b)
}
