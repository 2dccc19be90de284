package ndp

import "errors"

// errNotImplemented marks skeleton entry points that are not written yet.
// It is removed once the Endpoint is implemented.
var errNotImplemented = errors.New("ndp: endpoint not implemented yet")

// Endpoint is the NDP protocol state of one host interface.
type Endpoint struct {
	cfg   Config
	stats Stats
}

// NewEndpoint validates cfg (after filling defaults) and returns an Endpoint.
func NewEndpoint(cfg Config) (*Endpoint, error) {
	cfg.populate()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Endpoint{cfg: cfg}, nil
}

func (e *Endpoint) Listen(port uint16) error { return errNotImplemented }
func (e *Endpoint) Unlisten(port uint16)     {}
func (e *Endpoint) Dial(remote Addr, opts DialOptions, now Time) (Handle, error) {
	return 0, errNotImplemented
}
func (e *Endpoint) Write(h Handle, p []byte, now Time) (int, error) { return 0, errNotImplemented }
func (e *Endpoint) CloseWrite(h Handle, now Time) error             { return errNotImplemented }
func (e *Endpoint) Read(h Handle, p []byte) (int, error)            { return 0, errNotImplemented }
func (e *Endpoint) Abort(h Handle, now Time)                        {}
func (e *Endpoint) Quench(h Handle, now Time)                       {}
func (e *Endpoint) Release(h Handle)                                {}
func (e *Endpoint) HandleFrame(b []byte, now Time) error            { return errNotImplemented }
func (e *Endpoint) PullReleased(h Handle, now Time)                 {}
func (e *Endpoint) PollFrame(b []byte, now Time, allowPush bool) (n int, pushed bool) {
	return 0, false
}
func (e *Endpoint) PollEvent() (Event, bool) { return Event{}, false }
func (e *Endpoint) NextTimer() (Time, bool)  { return 0, false }
func (e *Endpoint) HandleTimers(now Time)    {}
func (e *Endpoint) Stats() Stats             { return e.stats }
