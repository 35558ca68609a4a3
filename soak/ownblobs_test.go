package main

import (
	"encoding/json"
	"io"
	"testing"

	"github.com/ddbpipe/ddbpipe/shared/objects"
)

func TestOwnBlobsReadsTheWritesFromTheLog(t *testing.T) {
	line := func(key, msg, id string) string {
		b, _ := json.Marshal(map[string]string{key: msg, "writeId": id, "key": "k"})
		return string(b) + "\n"
	}
	o := newOwnBlobs(io.Discard)
	for _, w := range []string{
		line("message", objects.OwnBlobLog, "a1"),                           // Lambda's JSON format
		line("msg", objects.OwnBlobLog, "b2") + line("msg", "other", "c3"),  // slog's, two lines in one write
		line("message", "shared blob deleted", "d4"),                        // another message
		line("message", objects.OwnBlobLog, ""),                             // no write id
		"time=x level=INFO msg=\"" + objects.OwnBlobLog + "\" writeId=e5\n", // text: not Lambda's JSON
		`{"message":"` + objects.OwnBlobLog + `","writeId":"f6"` + "\n",     // cut short
	} {
		if n, err := o.Write([]byte(w)); n != len(w) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	for id, want := range map[string]bool{"a1": true, "b2": true, "c3": false, "d4": false, "e5": false, "f6": false} {
		if got, _ := o.logged(id); got != want {
			t.Errorf("logged(%s) = %t, want %t", id, got, want)
		}
	}
	if _, n := o.logged(""); n != 2 {
		t.Errorf("%d writes, want 2", n)
	}
}
