package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"

	"github.com/ddbpipe/ddbpipe/shared/objects/objectsclient"
)

// objectsUpdate is a read-modify-write: the latest version goes through a
// shell command (stdin → stdout) and the output is stored with If-Match on
// the version read. Another writer in between is a 409; with -retries N
// the whole cycle runs again from a fresh read, up to N more times.
func objectsUpdate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newAPIFlags("objects update", asAPIInvoke, stderr)
	command := f.fs.String("exec", "", "shell command that turns the current document (stdin) into the new one (stdout); required")
	retries := f.fs.Int("retries", 0, "on a version conflict, read and apply the command again up to this many times")
	ct := f.fs.String("type", "", "content type of the new version (default: the current one's)")
	c, key, err := f.client(ctx, args)
	if err != nil {
		return err
	}
	if strings.TrimSpace(*command) == "" {
		return errors.New("objects update: -exec is required, e.g. -exec 'tr a-z A-Z'")
	}
	if *retries < 0 || *retries > 100 {
		return fmt.Errorf("objects update: -retries %d: want 0 to 100", *retries)
	}
	runs := 0
	m, err := c.ReadModifyWrite(ctx, key, *retries+1, objectsclient.PutOptions{ContentType: *ct}, func(cur []byte) ([]byte, error) {
		runs++
		cmd := exec.CommandContext(ctx, "sh", "-c", *command)
		cmd.Stdin = bytes.NewReader(cur)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("objects update: -exec %q: %w: %s", *command, err, strings.TrimSpace(errOut.String()))
		}
		return out.Bytes(), nil
	})
	if _, conflict := objectsclient.IsConflict(err); conflict {
		return fmt.Errorf("%w (another writer kept winning; raise -retries)", err)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: version %d (%d bytes, %s; %d attempt(s))\n", showKey(key), m.Version, m.Size, m.Kind, runs)
	return nil
}
