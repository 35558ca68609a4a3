package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"

	"github.com/aws/aws-lambda-go/events"
)

// S3Mapping delivers a bucket's notifications to a function.
type S3Mapping struct {
	Function string
	Bucket   string
	Events   []string // e.g. s3:ObjectCreated:*, s3:ObjectCreated:Put
	Prefix   string
	Suffix   string
}

// S3Object describes an object that was created, as the S3 proxy saw it.
type S3Object struct {
	Bucket    string
	Key       string
	Size      int64
	ETag      string
	VersionID string
	Event     string // Put, Post, Copy, CompleteMultipartUpload
}

type s3Notifier struct {
	mu       sync.Mutex
	mappings []S3Mapping
	seq      int64
}

// AddS3 registers a bucket notification.
func (r *Runner) AddS3(m S3Mapping) error {
	if _, err := r.Function(m.Function); err != nil {
		return err
	}
	if m.Bucket == "" {
		return fmt.Errorf("runner: S3 notification for %s has no bucket", m.Function)
	}
	r.s3.mu.Lock()
	defer r.s3.mu.Unlock()
	r.s3.mappings = append(r.s3.mappings, m)
	return nil
}

// ObjectCreated delivers an ObjectCreated notification to every matching
// function, asynchronously (as S3 does), with Lambda's async retries.
func (r *Runner) ObjectCreated(ctx context.Context, o S3Object) {
	name := "ObjectCreated:" + o.Event
	r.s3.mu.Lock()
	r.s3.seq++
	seq := r.s3.seq
	var targets []S3Mapping
	for _, m := range r.s3.mappings {
		if m.Bucket == o.Bucket && matchesS3Event(m.Events, "s3:"+name) &&
			strings.HasPrefix(o.Key, m.Prefix) && strings.HasSuffix(o.Key, m.Suffix) {
			targets = append(targets, m)
		}
	}
	r.s3.mu.Unlock()
	for _, m := range targets {
		ev := events.S3Event{Records: []events.S3EventRecord{{
			EventVersion: "2.1",
			EventSource:  "aws:s3",
			AWSRegion:    r.region,
			EventTime:    r.clock.Now().UTC(),
			EventName:    name,
			S3: events.S3Entity{
				SchemaVersion:   "1.0",
				ConfigurationID: m.Function,
				Bucket:          events.S3Bucket{Name: o.Bucket, Arn: "arn:aws:s3:::" + o.Bucket},
				Object: events.S3Object{
					// S3 sends keys URL-encoded, spaces as '+'.
					Key: url.QueryEscape(o.Key), URLDecodedKey: o.Key, Size: o.Size,
					ETag: strings.Trim(o.ETag, `"`), VersionID: o.VersionID, Sequencer: fmt.Sprintf("%016X", seq),
				},
			},
		}}}
		payload, err := json.Marshal(ev)
		if err != nil {
			r.log.Error("s3 event does not marshal", "err", err)
			continue
		}
		r.count(m.Function, func(s *Stats) { s.Records++ })
		r.wg.Add(1)
		go func(fn string) {
			defer r.wg.Done()
			if err := r.invokeAsync(context.WithoutCancel(ctx), fn, payload); err != nil {
				r.log.Error("s3 notification failed after retries", "function", fn, "key", o.Key, "err", err)
			}
		}(m.Function)
	}
}

func matchesS3Event(patterns []string, name string) bool {
	for _, p := range patterns {
		if p == name || strings.HasSuffix(p, ":*") && strings.HasPrefix(name, strings.TrimSuffix(p, "*")) {
			return true
		}
	}
	return false
}
