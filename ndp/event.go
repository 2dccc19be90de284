package ndp

// Handle names a connection in an Endpoint's table: slot index (low 32
// bits, plus one) and slot generation (high 32 bits). 0 is never valid.
type Handle uint64

func makeHandle(idx int32, gen uint32) Handle { return Handle(uint64(gen)<<32 | uint64(idx+1)) }

func (h Handle) index() int32 { return int32(uint32(h)) - 1 }
func (h Handle) gen() uint32  { return uint32(h >> 32) }

// Slot is the connection slot h names, in [0, Config.MaxConns) for a
// handle the endpoint gave out (-1 for the zero Handle). A released
// connection's slot goes to a later connection, so a table indexed by
// Slot must also compare the whole handle.
func (h Handle) Slot() int { return int(h.index()) }

// EventKind says what an Event reports.
type EventKind uint8

// Event kinds.
const (
	// EventAccepted: a new inbound connection on a listened port. Handle,
	// Remote, Priority, Size and Deadline (D3 hints) are set.
	EventAccepted EventKind = iota + 1
	// EventPulls: the receiver wants Count more PULLs for Handle enqueued in
	// the host pull queue (Priority, Size, Deadline describe the flow).
	EventPulls
	// EventDropPulls: the receiver saw LAST: drop Handle's queued PULLs.
	EventDropPulls
	// EventReadable: Read on Handle will return data or io.EOF.
	EventReadable
	// EventWritable: Write on Handle will accept bytes again.
	EventWritable
	// EventClosed: the connection is finished. Err is nil (clean close),
	// ErrConnReset, ErrConnRefused, ErrDeadlineUnmeetable, ErrTimeout, or
	// ErrClosed (aborted locally). The handle stays valid until Release.
	EventClosed
)

var eventNames = [...]string{"?", "Accepted", "Pulls", "DropPulls", "Readable", "Writable", "Closed"}

func (k EventKind) String() string {
	if int(k) < len(eventNames) {
		return eventNames[k]
	}
	return "?"
}

// Event is an output of the Endpoint for the host loop.
type Event struct {
	Kind     EventKind
	Handle   Handle
	Count    int   // EventPulls: number of pulls to enqueue
	Priority uint8 // EventAccepted, EventPulls
	Size     int64 // D3 size hint (EventAccepted, EventPulls)
	Deadline Time  // D3 deadline, absolute on this endpoint's clock (0 = none)
	Remote   Addr  // EventAccepted
	// LocalPort is the listened NDP port the connection arrived on (EventAccepted).
	LocalPort uint16
	Err       error // EventClosed
}
