package ring

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error this package returns wraps one of these, so
// callers branch with errors.Is.
var (
	// ErrBadHeader reports a region header that failed validation (magic,
	// checksum, sizes, ring table). The concrete error is a *HeaderError.
	ErrBadHeader = errors.New("ring: bad region header")
	// ErrVersion reports a region whose layout version this build does not
	// speak. The concrete error is a *HeaderError.
	ErrVersion = errors.New("ring: unsupported region layout version")
	// ErrRingCorrupt reports a peer index that no well-behaved peer can
	// produce (producer more than a ring ahead, or an index moving backwards).
	// The ring is poisoned: every later call returns this error, and the
	// caller should drop the peer.
	ErrRingCorrupt = errors.New("ring: peer index out of range (corrupt or hostile peer)")
	// ErrFrameRange reports a buffer index outside the frames the caller may
	// name (outside the buffer area, or outside the partition it must come from).
	ErrFrameRange = errors.New("ring: frame index out of range")
	// ErrFrameNotOwned reports a buffer index the peer does not own at the moment
	// (another application's frame, a frame still in flight, a daemon frame
	// never lent to it).
	ErrFrameNotOwned = errors.New("ring: frame not owned by the submitter")
	// ErrBadLength reports a descriptor whose Off+Len does not fit its frame.
	ErrBadLength = errors.New("ring: descriptor length exceeds frame")
	// ErrDoubleFree reports a frame returned to a free list it is already on.
	ErrDoubleFree = errors.New("ring: frame freed twice")
	// ErrNoPartition reports that every application partition of the pool is
	// in use: the daemon must refuse the new application (backpressure).
	ErrNoPartition = errors.New("ring: no free application partition")
	// ErrStaleApp reports an AppID whose partition was reclaimed (or never
	// assigned).
	ErrStaleApp = errors.New("ring: unknown or reclaimed application")
	// ErrBadConfig reports an invalid configuration; the concrete error is a
	// *ConfigError.
	ErrBadConfig = errors.New("ring: invalid configuration")
	// ErrBadAttachment reports a control message that is not a well-formed
	// region attachment (wrong magic, wrong number of descriptors, truncated).
	ErrBadAttachment = errors.New("ring: malformed attachment message")
)

// HeaderError says which field of a region header failed validation. It
// matches ErrBadHeader, or ErrVersion for a version mismatch, with errors.Is.
type HeaderError struct {
	Field  string // header field or ring-table entry, e.g. "crc", "ring[3].offset"
	Reason string
	// Version is set (and Is matches ErrVersion) when the version word was the problem.
	Version bool
}

func (e *HeaderError) Error() string {
	return fmt.Sprintf("ring: region header: %s: %s", e.Field, e.Reason)
}

// Is lets errors.Is(err, ErrBadHeader) and errors.Is(err, ErrVersion) work.
func (e *HeaderError) Is(target error) bool {
	if target == ErrBadHeader {
		return true
	}
	return e.Version && target == ErrVersion
}

func headerErr(field, format string, args ...any) error {
	return &HeaderError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// ConfigError says which configuration field is invalid; it matches ErrBadConfig.
type ConfigError struct {
	Field  string
	Reason string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("ring: config %s: %s", e.Field, e.Reason)
}

// Is lets errors.Is(err, ErrBadConfig) work.
func (e *ConfigError) Is(target error) bool { return target == ErrBadConfig }

func configErr(field, format string, args ...any) error {
	return &ConfigError{Field: field, Reason: fmt.Sprintf(format, args...)}
}
