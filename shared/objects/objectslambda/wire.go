package objectslambda

import (
	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsapi"
)

// The domain's values as the wire contract (package objectsapi) carries them.

func meta(r objects.Record) objectsapi.Meta {
	return objectsapi.Meta{
		Key: r.Key, Version: r.Version, Size: r.Size, SHA256: r.SHA256.String(), ContentType: r.ContentType,
		Kind: string(r.Kind), Codec: string(r.Codec), Modified: r.CreatedAt.UTC(),
	}
}

func status(u objects.Upload) objectsapi.UploadStatus {
	s := objectsapi.UploadStatus{
		ID: u.ID, Key: u.Key, State: string(u.State), Version: u.Version, Unchanged: u.Unchanged, Reason: u.Reason, Message: u.Detail,
		Size: u.Size, SHA256: u.SHA256.String(), ContentType: u.ContentType, Deadline: u.Deadline.UTC(),
		Status: objectsapi.UploadPath(u.Key, u.ID),
	}
	if u.Reason == objects.UploadFailedConflict {
		cur := u.Current
		s.CurrentVersion = &cur
	}
	return s
}

func signed(r objects.SignedRequest) objectsapi.SignedRequest {
	return objectsapi.SignedRequest{Method: r.Method, URL: r.URL, Header: r.Header, Expires: r.Expires}
}

func granted(g objects.Grant, completePath string) objectsapi.Granted {
	out := objectsapi.Granted{UploadStatus: status(g.Upload)}
	if g.Put != nil {
		p := signed(*g.Put)
		out.Put = &p
	}
	if g.Upload.MultipartID != "" {
		mp := &objectsapi.Multipart{PartSize: g.Upload.PartSize, Parts: make([]objectsapi.SignedRequest, len(g.Parts)), Complete: completePath}
		for i, p := range g.Parts {
			mp.Parts[i] = signed(p)
		}
		out.Multipart = mp
	}
	return out
}

func parts(in []objectsapi.Part) []objects.Part {
	if in == nil {
		return nil
	}
	out := make([]objects.Part, len(in))
	for i, p := range in {
		out[i] = objects.Part{Number: p.Number, ETag: p.ETag}
	}
	return out
}
