-- Wireshark / tshark dissector for the NDP header (ndpstack, header version 1).
--
-- Layout: docs/wire.md and ndp/wire.go. The 48-byte header follows UDP;
-- every multi-byte field is big-endian. Registered on the NDP service port
-- (UDP destination port, default 6420; change it under Preferences >
-- Protocols > NDP, or with -o ndp.port:N).
--
--   wireshark -X lua_script:contrib/wireshark/ndp.lua capture.pcapng
--   tshark -X lua_script:contrib/wireshark/ndp.lua -r capture.pcapng -Y ndp.flags.trimmed==1
--
-- Fields: ndp.version, ndp.type, ndp.flags (+ one boolean per flag:
-- ndp.flags.syn ... ndp.flags.ack), ndp.srcport, ndp.dstport, ndp.connid,
-- ndp.seq, ndp.pull (pull counter; on DATA with the ACK flag: the
-- acknowledged seq, ndp.acked), ndp.synoff, ndp.len (payload length, kept
-- on trimmed frames), ndp.path, ndp.prio, ndp.code (RESET reason; on DATA
-- carrying an ACK, ndp.ackpath: the acknowledged packet's path + 1),
-- ndp.offset (stream offset; ACK with ACKMORE: ndp.ackbitmap),
-- ndp.flowsize and ndp.deadline (D3 hints), ndp.payload, and ndp.cut on a
-- DATA frame a commodity switch trimmed (fewer payload bytes than ndp.len
-- and no TRIMMED flag: sockapi Config.CommodityTrim).

local ndp = Proto("ndpstack", "NDP (receiver-driven datacenter transport, ndpstack)")

local types = { [1] = "DATA", [2] = "ACK", [3] = "NACK", [4] = "PULL", [5] = "RESET" }
local codes = { [0] = "abort", [1] = "refused", [2] = "deadline unmeetable", [3] = "timeout", [4] = "message too large" }

local F = ndp.fields
F.version  = ProtoField.uint8("ndp.version", "Version", base.DEC)
F.type     = ProtoField.uint8("ndp.type", "Type", base.DEC, types)
F.flags    = ProtoField.uint16("ndp.flags", "Flags", base.HEX)
F.f_syn    = ProtoField.bool("ndp.flags.syn", "SYN", 16, nil, 0x0001)
F.f_last   = ProtoField.bool("ndp.flags.last", "LAST", 16, nil, 0x0002)
F.f_fin    = ProtoField.bool("ndp.flags.fin", "FIN", 16, nil, 0x0004)
F.f_trim   = ProtoField.bool("ndp.flags.trimmed", "TRIMMED", 16, nil, 0x0008)
F.f_bounce = ProtoField.bool("ndp.flags.bounced", "BOUNCED", 16, nil, 0x0010)
F.f_prio   = ProtoField.bool("ndp.flags.priority", "PRIORITY", 16, nil, 0x0020)
F.f_paced  = ProtoField.bool("ndp.flags.paced", "PACED", 16, nil, 0x0040)
F.f_pulled = ProtoField.bool("ndp.flags.pulled", "PULLED", 16, nil, 0x0080)
F.f_more   = ProtoField.bool("ndp.flags.ackmore", "ACKMORE", 16, nil, 0x0100)
F.f_pull   = ProtoField.bool("ndp.flags.pull", "PULL", 16, nil, 0x0200)
F.f_ack    = ProtoField.bool("ndp.flags.ack", "ACK", 16, nil, 0x0400)
F.srcport  = ProtoField.uint16("ndp.srcport", "Source port", base.DEC)
F.dstport  = ProtoField.uint16("ndp.dstport", "Destination port", base.DEC)
F.connid   = ProtoField.uint32("ndp.connid", "Connection id", base.HEX)
F.seq      = ProtoField.uint32("ndp.seq", "Sequence number", base.DEC)
F.pull     = ProtoField.uint32("ndp.pull", "Pull counter", base.DEC)
F.acked    = ProtoField.uint32("ndp.acked", "Acknowledged seq (piggybacked ACK)", base.DEC)
F.synoff   = ProtoField.uint16("ndp.synoff", "SYN offset", base.DEC)
F.len      = ProtoField.uint16("ndp.len", "Payload length", base.DEC)
F.path     = ProtoField.uint16("ndp.path", "Path id", base.DEC)
F.prio     = ProtoField.uint8("ndp.prio", "Priority class", base.DEC)
F.code     = ProtoField.uint8("ndp.code", "Reset code", base.DEC, codes)
F.ackpath  = ProtoField.uint8("ndp.ackpath", "Acknowledged packet's path + 1 (carried ACK)", base.DEC)
F.offset   = ProtoField.uint64("ndp.offset", "Stream offset", base.DEC)
F.bitmap   = ProtoField.uint64("ndp.ackbitmap", "More acknowledged (bit i: seq+1+i)", base.HEX)
F.flowsize = ProtoField.uint64("ndp.flowsize", "D3 flow size (bytes, 0 none)", base.DEC)
F.deadline = ProtoField.uint32("ndp.deadline", "D3 deadline (us from send, 0 none)", base.DEC)
F.payload  = ProtoField.bytes("ndp.payload", "Payload")
F.cut      = ProtoField.bool("ndp.cut", "Payload cut by a switch that does not know NDP (commodity trim: fewer bytes than the payload length, no TRIMMED flag)")

local flagNames = {
	{ 0x0001, "SYN" }, { 0x0002, "LAST" }, { 0x0004, "FIN" }, { 0x0008, "TRIMMED" },
	{ 0x0010, "BOUNCED" }, { 0x0020, "PRIO" }, { 0x0040, "PACED" }, { 0x0080, "PULLED" },
	{ 0x0100, "ACKMORE" }, { 0x0200, "PULL" }, { 0x0400, "ACK" },
}

local HEADER_LEN = 48

-- has reports whether bit mask (a power of two) is set in v, without a bit
-- library (Lua 5.2's bit32 is gone in 5.4).
local function has(v, mask)
	return math.floor(v / mask) % 2 == 1
end

ndp.prefs.port = Pref.uint("NDP UDP port", 6420, "UDP destination port of NDP frames")

function ndp.dissector(buf, pinfo, tree)
	if buf:len() < HEADER_LEN then
		return 0
	end
	pinfo.cols.protocol = "NDP"
	local t = buf(1, 1):uint()
	local flags = buf(2, 2):uint()
	local names = {}
	for _, f in ipairs(flagNames) do
		if has(flags, f[1]) then
			names[#names + 1] = f[2]
		end
	end
	local flagStr = table.concat(names, ",")

	local st = tree:add(ndp, buf(0, HEADER_LEN), "NDP " .. (types[t] or "UNKNOWN") ..
		(flagStr ~= "" and (" [" .. flagStr .. "]") or ""))
	st:add(F.version, buf(0, 1))
	st:add(F.type, buf(1, 1))
	local ft = st:add(F.flags, buf(2, 2))
	ft:append_text(flagStr ~= "" and (" (" .. flagStr .. ")") or "")
	for _, f in ipairs({ F.f_syn, F.f_last, F.f_fin, F.f_trim, F.f_bounce, F.f_prio, F.f_paced,
		F.f_pulled, F.f_more, F.f_pull, F.f_ack }) do
		ft:add(f, buf(2, 2))
	end
	st:add(F.srcport, buf(4, 2))
	st:add(F.dstport, buf(6, 2))
	st:add(F.connid, buf(8, 4))
	st:add(F.seq, buf(12, 4))
	if t == 1 and has(flags, 0x0400) then
		st:add(F.acked, buf(16, 4))
	else
		st:add(F.pull, buf(16, 4))
	end
	st:add(F.synoff, buf(20, 2))
	st:add(F.len, buf(22, 2))
	st:add(F.path, buf(24, 2))
	st:add(F.prio, buf(26, 1))
	if t == 1 and has(flags, 0x0400) then
		st:add(F.ackpath, buf(27, 1))
	else
		st:add(F.code, buf(27, 1))
	end
	if t == 2 and has(flags, 0x0100) then
		st:add(F.bitmap, buf(28, 8))
	else
		st:add(F.offset, buf(28, 8))
	end
	st:add(F.flowsize, buf(36, 8))
	st:add(F.deadline, buf(44, 4))
	local have = buf:len() - HEADER_LEN
	if have > 0 then
		st:add(F.payload, buf(HEADER_LEN))
	end
	local cut = t == 1 and not has(flags, 0x0008) and have < buf(22, 2):uint()
	if cut then
		st:add(F.cut, true)
		flagStr = flagStr .. (flagStr ~= "" and "," or "") .. "CUT"
	end

	local info = string.format("%s conn=0x%08x seq=%u", types[t] or ("type " .. t), buf(8, 4):uint(), buf(12, 4):uint())
	if t == 4 or has(flags, 0x0200) then
		info = info .. string.format(" pull=%u", buf(16, 4):uint())
	end
	if t == 1 then
		info = info .. string.format(" len=%u path=%u", buf(22, 2):uint(), buf(24, 2):uint())
	end
	if flagStr ~= "" then
		info = info .. " [" .. flagStr .. "]"
	end
	pinfo.cols.info = info
	return buf:len()
end

local registered = nil
function ndp.init()
	local udp = DissectorTable.get("udp.port")
	if registered ~= nil then
		udp:remove(registered, ndp)
	end
	registered = ndp.prefs.port
	udp:add(registered, ndp)
end
