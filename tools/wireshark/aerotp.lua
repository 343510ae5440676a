-- AeroTP dissector for Wireshark and tshark (Lua; Wireshark 3.6 or later).
--
-- Decodes every TPDU as docs/spec.md defines it byte by byte (the reference is crates/wire):
-- the 20-byte header, the header check (CRC-16/CCITT-FALSE over bytes 0-17) and the body's
-- CRC-32C, both recomputed and shown with expert info when they fail, the FEC parity trailer,
-- and the control bodies (ACK, MACK, NACK, SNACK, RPT, RST) in their wire order. Sequence
-- analysis marks a data TPDU whose number was seen before in the same direction (and capture
-- interface) as a retransmission, and one older than the newest seen as out of order.
-- Authenticated TPDUs (AUTH bit, spec §8) show their envelope: key id, whether the body is
-- encrypted, the nonce (sender instance and packet number) and the AEAD tag. The dissector
-- holds no key, so it cannot verify a tag or decrypt a body: it says so on every such TPDU;
-- control bodies sent in clear are decoded as usual.
-- AeroTP is found on the fixed UDP port (preference, default 9000) and, by a heuristic, on any
-- other UDP port.
--
-- Use: wireshark -X lua_script:tools/wireshark/aerotp.lua capture.pcapng
--      tshark -X lua_script:tools/wireshark/aerotp.lua -r capture.pcapng -Y aerotp
-- See tools/wireshark/README.md and docs/capture.md.

local bit = bit32 or bit -- Lua 5.2 builds carry bit32, others Wireshark's BitOp

local aerotp = Proto("aerotp", "AeroTP")

local MODES = {
    [0] = "reliable", [1] = "near-reliable", [2] = "quasi-reliable", [3] = "hybrid-nack",
    [4] = "hybrid-nack-mack", [5] = "unreliable", [6] = "datagram",
}
local F_ASYN, F_AFIN, F_ACK, F_MACK = 0x01, 0x02, 0x04, 0x08
local F_NACK, F_SNACK, F_RST, F_RPT = 0x10, 0x20, 0x40, 0x80
local F_CONTROL = 0xFC
-- A repair TPDU (erasure coding, spec §7): flags exactly RST|RPT.
local F_REPAIR = 0xC0
-- Address validation (spec §9): CHALLENGE/RETRY exactly ASYN|RST, ECHO exactly ASYN|RPT.
local F_CHALLENGE, F_ECHO = 0x41, 0x81
local COOKIE_LEN = 16
local CID_LEN = 8
local HEADER_LEN, CRC_LEN = 20, 4
local AUTH_BIT, AUTH_HEAD, TAG_LEN = 0x08, 13, 16 -- key byte + nonce before the body

local pf = {
    version = ProtoField.uint8("aerotp.version", "Version", base.DEC, nil, 0xF0),
    mode = ProtoField.uint8("aerotp.mode", "Mode", base.DEC, MODES, 0x07),
    auth = ProtoField.bool("aerotp.auth", "Authenticated (AUTH)", 8, nil, 0x08),
    auth_key_id = ProtoField.uint8("aerotp.auth.key_id", "Key id", base.DEC, nil, 0x7F),
    auth_encrypted = ProtoField.bool("aerotp.auth.encrypted", "Body encrypted", 8, nil, 0x80),
    auth_instance = ProtoField.uint32("aerotp.auth.instance", "Nonce: sender instance", base.HEX),
    auth_pn = ProtoField.uint64("aerotp.auth.pn", "Nonce: packet number", base.DEC),
    auth_tag = ProtoField.bytes("aerotp.auth.tag", "AEAD tag (AES-256-GCM)"),
    auth_status = ProtoField.string("aerotp.auth.status", "Tag status"),
    ciphertext = ProtoField.bytes("aerotp.ciphertext", "Encrypted body"),
    flags = ProtoField.uint8("aerotp.flags", "Flags", base.HEX),
    f_asyn = ProtoField.bool("aerotp.flags.asyn", "ASYN", 8, nil, F_ASYN),
    f_afin = ProtoField.bool("aerotp.flags.afin", "AFIN", 8, nil, F_AFIN),
    f_ack = ProtoField.bool("aerotp.flags.ack", "ACK", 8, nil, F_ACK),
    f_mack = ProtoField.bool("aerotp.flags.mack", "MACK", 8, nil, F_MACK),
    f_nack = ProtoField.bool("aerotp.flags.nack", "NACK", 8, nil, F_NACK),
    f_snack = ProtoField.bool("aerotp.flags.snack", "SNACK", 8, nil, F_SNACK),
    f_rst = ProtoField.bool("aerotp.flags.rst", "RST", 8, nil, F_RST),
    f_rpt = ProtoField.bool("aerotp.flags.rpt", "RPT", 8, nil, F_RPT),
    src_port = ProtoField.uint16("aerotp.src_port", "Source port", base.DEC),
    dst_port = ProtoField.uint16("aerotp.dst_port", "Destination port", base.DEC),
    seq = ProtoField.uint32("aerotp.seq", "Sequence number", base.DEC),
    timestamp = ProtoField.uint32("aerotp.timestamp", "Timestamp (us)", base.DEC),
    -- A RST's timestamp field echoes the TPDU it answers (spec §4, RST).
    rst_ts_echo = ProtoField.uint32("aerotp.rst.ts_echo", "Echoed timestamp (us)", base.DEC),
    fec = ProtoField.uint8("aerotp.fec", "FEC parity per codeword", base.DEC),
    tag = ProtoField.uint8("aerotp.tag", "Connection tag", base.DEC),
    len = ProtoField.uint16("aerotp.len", "Body length", base.DEC),
    hec = ProtoField.uint16("aerotp.hec", "Header check", base.HEX),
    hec_status = ProtoField.string("aerotp.hec.status", "Header check status"),
    hec_computed = ProtoField.uint16("aerotp.hec.computed", "Header check computed", base.HEX),
    type = ProtoField.string("aerotp.type", "TPDU type"),
    data = ProtoField.bytes("aerotp.data", "Data"),
    gw_open = ProtoField.bytes("aerotp.gw.open", "AeroGW open record"),
    gw_flags = ProtoField.uint8("aerotp.gw.flags", "Open flags", base.HEX),
    gw_class = ProtoField.uint8("aerotp.gw.class", "Class", base.DEC),
    gw_flow = ProtoField.uint64("aerotp.gw.flow_id", "Flow id", base.HEX),
    gw_in = ProtoField.uint64("aerotp.gw.in_delivered", "Reverse bytes written", base.DEC),
    gw_dest = ProtoField.string("aerotp.gw.dest", "Destination"),
    gw_port = ProtoField.uint16("aerotp.gw.port", "Destination port", base.DEC),
    crc = ProtoField.uint32("aerotp.crc", "CRC-32C", base.HEX),
    crc_status = ProtoField.string("aerotp.crc.status", "CRC-32C status"),
    crc_computed = ProtoField.uint32("aerotp.crc.computed", "CRC-32C computed", base.HEX),
    parity = ProtoField.bytes("aerotp.fec.parity", "FEC parity"),
    codewords = ProtoField.uint16("aerotp.fec.codewords", "FEC codewords", base.DEC),
    ack_cum = ProtoField.uint64("aerotp.ack.cum", "Cumulative (next expected TPDU)", base.DEC),
    ack_delivered = ProtoField.uint64("aerotp.ack.delivered", "Bytes delivered", base.DEC),
    ack_window = ProtoField.uint32("aerotp.ack.window", "Window (TPDUs)", base.DEC),
    mack_ts_echo = ProtoField.uint32("aerotp.mack.ts_echo", "Timestamp echo (us)", base.DEC),
    mack_ack_delay = ProtoField.uint16("aerotp.mack.ack_delay", "Ack delay (100 us)", base.DEC),
    mack_max_delay = ProtoField.uint16("aerotp.mack.max_delay", "Max ack delay (ms)", base.DEC),
    mack_count = ProtoField.uint16("aerotp.mack.count", "Selective entries", base.DEC),
    mack_entry = ProtoField.uint32("aerotp.mack.entry", "Selectively acknowledged", base.DEC),
    mack_range_count = ProtoField.uint16("aerotp.mack.range_count", "Received ranges", base.DEC),
    mack_range_start = ProtoField.uint32("aerotp.mack.range_start", "Received from", base.DEC),
    mack_range_end = ProtoField.uint32("aerotp.mack.range_end", "Received up to (excl.)", base.DEC),
    nack_count = ProtoField.uint16("aerotp.nack.count", "NACK entries", base.DEC),
    nack_entry = ProtoField.uint32("aerotp.nack.entry", "Arrived corrupted", base.DEC),
    snack_count = ProtoField.uint16("aerotp.snack.count", "SNACK ranges", base.DEC),
    snack_start = ProtoField.uint32("aerotp.snack.start", "Missing from", base.DEC),
    snack_end = ProtoField.uint32("aerotp.snack.end", "Missing up to (exclusive)", base.DEC),
    rpt_ber = ProtoField.uint32("aerotp.rpt.ber_ppb", "Bit-error rate (per 10^9)", base.DEC),
    rpt_tpdus = ProtoField.uint32("aerotp.rpt.tpdus", "TPDUs in estimate", base.DEC),
    rpt_lost = ProtoField.uint32("aerotp.rpt.lost", "TPDUs lost or uncorrectable", base.DEC),
    rpt_seen = ProtoField.uint32("aerotp.rpt.seen", "Data TPDUs known sent", base.DEC),
    rpt_wire_lost = ProtoField.uint32("aerotp.rpt.wire_lost", "Lost on the link before repair", base.DEC),
    rpt_bursts = ProtoField.uint32("aerotp.rpt.bursts", "Loss runs", base.DEC),
    rep_code = ProtoField.uint8("aerotp.repair.code", "Code", base.DEC,
        { [1] = "Reed-Solomon block", [2] = "sliding-window RLC" }),
    rep_reserved = ProtoField.uint8("aerotp.repair.reserved", "Reserved", base.DEC),
    rep_first = ProtoField.uint32("aerotp.repair.first_seq", "First TPDU covered", base.DEC),
    rep_span = ProtoField.uint16("aerotp.repair.span", "TPDUs covered", base.DEC),
    rep_index = ProtoField.uint16("aerotp.repair.index", "Repair index", base.DEC),
    rep_total = ProtoField.uint16("aerotp.repair.total", "Repairs in block", base.DEC),
    rep_seed = ProtoField.uint32("aerotp.repair.seed", "Coefficient seed", base.HEX),
    rep_bytes = ProtoField.uint16("aerotp.repair.symbol_bytes", "Symbol bytes", base.DEC),
    rep_symbol = ProtoField.bytes("aerotp.repair.symbol", "Repair symbol"),
    chal_kind = ProtoField.uint8("aerotp.challenge.kind", "Kind", base.DEC,
        { [0] = "challenge (state kept)", [1] = "retry (no state kept)" }),
    chal_ts_echo = ProtoField.uint32("aerotp.challenge.ts_echo", "Echoed timestamp (us)", base.DEC),
    cookie = ProtoField.bytes("aerotp.cookie", "Cookie"),
    cid = ProtoField.uint64("aerotp.cid", "Connection identifier (sender's)", base.HEX),
    rst_reason = ProtoField.string("aerotp.rst.reason", "Reset reason"),
    retransmission = ProtoField.framenum("aerotp.analysis.retransmission",
        "Retransmission of frame"),
    out_of_order = ProtoField.bool("aerotp.analysis.out_of_order", "Out of order"),
}
local field_list = {}
for _, f in pairs(pf) do field_list[#field_list + 1] = f end
aerotp.fields = field_list

local ef = {
    hec_bad = ProtoExpert.new("aerotp.hec.bad", "Header check failed", expert.group.CHECKSUM,
        expert.severity.ERROR),
    crc_bad = ProtoExpert.new("aerotp.crc.bad", "CRC-32C failed (arrived corrupted)",
        expert.group.CHECKSUM, expert.severity.ERROR),
    version = ProtoExpert.new("aerotp.version.bad", "Unknown version", expert.group.MALFORMED,
        expert.severity.ERROR),
    mode = ProtoExpert.new("aerotp.mode.reserved", "Reserved transfer mode",
        expert.group.MALFORMED, expert.severity.ERROR),
    short = ProtoExpert.new("aerotp.short", "Datagram shorter than the header says",
        expert.group.MALFORMED, expert.severity.ERROR),
    body = ProtoExpert.new("aerotp.body.bad", "Control body does not match its flags",
        expert.group.MALFORMED, expert.severity.WARN),
    parity = ProtoExpert.new("aerotp.fec.mismatch", "Trailer length does not match the FEC field",
        expert.group.PROTOCOL, expert.severity.WARN),
    retx = ProtoExpert.new("aerotp.analysis.retransmission.expert", "Retransmission",
        expert.group.SEQUENCE, expert.severity.NOTE),
    ooo = ProtoExpert.new("aerotp.analysis.out_of_order.expert", "Out-of-order TPDU",
        expert.group.SEQUENCE, expert.severity.WARN),
    unverified = ProtoExpert.new("aerotp.auth.unverified",
        "AEAD tag not verified: the dissector has no key", expert.group.SECURITY,
        expert.severity.NOTE),
    envelope = ProtoExpert.new("aerotp.auth.short", "Body too short for the auth envelope",
        expert.group.MALFORMED, expert.severity.ERROR),
}
aerotp.experts = { ef.hec_bad, ef.crc_bad, ef.version, ef.mode, ef.short, ef.body, ef.parity,
    ef.retx, ef.ooo, ef.unverified, ef.envelope }

aerotp.prefs.port = Pref.uint("UDP port", 9000, "UDP port decoded as AeroTP without heuristics")
aerotp.prefs.heuristic = Pref.bool("Heuristic on every UDP port", true,
    "Find AeroTP on any UDP port by its header check or its self-consistent lengths")

-- CRC tables, built once. Values are kept as non-negative Lua numbers below 2^32.
local function u32(x) if x < 0 then x = x + 4294967296 end return x end

local CRC16 = {}
for i = 0, 255 do
    local c = bit.lshift(i, 8)
    for _ = 1, 8 do
        if bit.band(c, 0x8000) ~= 0 then
            c = bit.bxor(bit.lshift(c, 1), 0x1021)
        else
            c = bit.lshift(c, 1)
        end
        c = bit.band(c, 0xFFFF)
    end
    CRC16[i] = c
end

local CRC32C = {}
for i = 0, 255 do
    local c = i
    for _ = 1, 8 do
        if bit.band(c, 1) ~= 0 then
            c = bit.bxor(bit.rshift(c, 1), 0x82F63B78)
        else
            c = bit.rshift(c, 1)
        end
    end
    CRC32C[i] = u32(c)
end

-- CRC-16/IBM-3740 (CCITT-FALSE: poly 0x1021, init 0xFFFF, no reflection, no xorout).
local function hec(tvb, off, n)
    local bytes = tvb:raw(off, n)
    local c = 0xFFFF
    for i = 1, n do
        local idx = bit.bxor(bit.rshift(c, 8), bytes:byte(i))
        c = bit.band(bit.bxor(bit.lshift(c, 8), CRC16[idx]), 0xFFFF)
    end
    return c
end

-- CRC-32C (Castagnoli, reflected, init and xorout 0xFFFFFFFF).
local function crc32c(tvb, off, n)
    if n == 0 then return 0 end
    local bytes = tvb:raw(off, n)
    local c = 0xFFFFFFFF
    for i = 1, n do
        local idx = bit.band(bit.bxor(c, bytes:byte(i)), 0xFF)
        c = bit.bxor(bit.rshift(c, 8), CRC32C[idx])
    end
    return u32(bit.bnot(c))
end

-- Transfer mode 6, datagram: no connection. There the ASYN bit means SOURCE, a numbered
-- datagram of a route that sends erasure repair (spec §7, "Datagram routes").
local MODE_DATAGRAM = 6

-- The type of a TPDU as one word, from its flags and mode (spec §2, §4 and §7).
local function type_name(flags, mode)
    if flags == F_REPAIR then return "REPAIR" end
    if mode == MODE_DATAGRAM and flags == F_ASYN then return "SOURCE" end
    if flags == F_CHALLENGE then return "CHALLENGE" end
    if flags == F_ECHO then return "ECHO" end
    if bit.band(flags, F_CONTROL) == 0 then
        local parts = {}
        if bit.band(flags, F_ASYN) ~= 0 then parts[#parts + 1] = "ASYN" end
        if bit.band(flags, F_AFIN) ~= 0 then parts[#parts + 1] = "AFIN" end
        if #parts == 0 then return "DATA" end
        return "DATA+" .. table.concat(parts, "+")
    end
    local parts = {}
    local ack_part
    if bit.band(flags, F_MACK) ~= 0 then
        ack_part = bit.band(flags, F_ASYN) ~= 0 and "ASYNACK" or "MACK"
    elseif bit.band(flags, F_ACK) ~= 0 then
        ack_part = bit.band(flags, F_AFIN) ~= 0 and "AFINACK" or "ACK"
    end
    if ack_part then parts[#parts + 1] = ack_part end
    if bit.band(flags, F_NACK) ~= 0 then parts[#parts + 1] = "NACK" end
    if bit.band(flags, F_SNACK) ~= 0 then parts[#parts + 1] = "SNACK" end
    if bit.band(flags, F_RPT) ~= 0 then parts[#parts + 1] = "RPT" end
    if bit.band(flags, F_RST) ~= 0 then parts[#parts + 1] = "RST" end
    return table.concat(parts, "+")
end

-- Parity bytes and codewords for a datagram of `total` bytes with `p` parity bytes per
-- codeword (spec §3: m = ceil(T / 255)).
local function fec_trailer(total, p)
    if p == 0 then return 0, 0 end
    local m = math.floor((total + 254) / 255)
    return m * p, m
end

-- Whether `tvb` looks like an AeroTP TPDU: the header check holds, or (one damaged field
-- being tolerated, so a TPDU with a flipped header bit is still shown as AeroTP with a failed
-- check) version and mode are valid and the lengths add up exactly.
local function looks_like_aerotp(tvb)
    local total = tvb:len()
    if total < HEADER_LEN + CRC_LEN then return false end
    if hec(tvb, 0, 18) == tvb(18, 2):uint() then return true end
    local vm = tvb(0, 1):uint()
    if bit.rshift(vm, 4) ~= 1 or bit.band(vm, 0x07) > 6 then return false end
    local n = tvb(16, 2):uint()
    local parity = fec_trailer(total, tvb(14, 1):uint())
    return HEADER_LEN + n + CRC_LEN + parity == total
end

-- Sequence analysis state, filled on the first pass and read on every later one.
local frame_info = {} -- frame number -> { retx = frame, ooo = bool }
local directions = {} -- direction key -> { seen = {seq -> frame}, high = seq }

local fi_iface = Field.new("frame.interface_id")

-- Serial-number comparison of 32-bit sequence numbers: whether a is before b.
local function seq_before(a, b)
    local d = (b - a) % 4294967296
    return d ~= 0 and d < 2147483648
end

local function analyse(pinfo, flags, seq, tag)
    local info = frame_info[pinfo.number]
    if info then return info end
    info = {}
    if not pinfo.visited and bit.band(flags, F_CONTROL) == 0 then
        local iface = fi_iface()
        local key = table.concat({ tostring(iface and iface.value or 0), tostring(pinfo.src),
            tostring(pinfo.src_port), tostring(pinfo.dst), tostring(pinfo.dst_port),
            tostring(tag) }, "|")
        local d = directions[key]
        if not d then
            d = { seen = {}, high = nil }
            directions[key] = d
        end
        if d.seen[seq] then
            info.retx = d.seen[seq]
        elseif d.high and seq_before(seq, d.high) then
            info.ooo = true
        end
        if not d.seen[seq] then d.seen[seq] = pinfo.number end
        if not d.high or seq_before(d.high, seq) then d.high = seq end
    end
    frame_info[pinfo.number] = info
    return info
end

-- Adds the control parts announced by `flags` from body [off, off+n); returns false when the
-- body does not hold them exactly (short or trailing bytes).
local function dissect_control(tvb, tree, flags, off, n)
    local pos, stop = off, off + n
    local function need(k) return pos + k <= stop end
    local function ack_fields(t)
        if not need(20) then return false end
        t:add(pf.ack_cum, tvb(pos, 8)); t:add(pf.ack_delivered, tvb(pos + 8, 8))
        t:add(pf.ack_window, tvb(pos + 16, 4))
        pos = pos + 20
        return true
    end
    -- A 16-bit count, then that many (start, end) pairs of 32-bit TPDU numbers (MACK ranges,
    -- SNACK ranges).
    local function pair_list(t, count_f, start_f, end_f)
        if not need(2) then return false end
        local k = tvb(pos, 2):uint()
        t:add(count_f, tvb(pos, 2)); pos = pos + 2
        if not need(8 * k) then return false end
        for _ = 1, k do
            t:add(start_f, tvb(pos, 4)); t:add(end_f, tvb(pos + 4, 4))
            pos = pos + 8
        end
        return true
    end
    if bit.band(flags, F_MACK) ~= 0 then
        local t = tree:add(aerotp, tvb(pos, math.min(stop - pos, 32)), "MACK")
        if not ack_fields(t) then return false end
        if not need(10) then return false end
        t:add(pf.mack_ts_echo, tvb(pos, 4)); t:add(pf.mack_ack_delay, tvb(pos + 4, 2))
        t:add(pf.mack_max_delay, tvb(pos + 6, 2)); t:add(pf.mack_count, tvb(pos + 8, 2))
        local k = tvb(pos + 8, 2):uint()
        pos = pos + 10
        if not need(4 * k) then return false end
        for _ = 1, k do t:add(pf.mack_entry, tvb(pos, 4)); pos = pos + 4 end
        if not pair_list(t, pf.mack_range_count, pf.mack_range_start, pf.mack_range_end) then
            return false
        end
        t:set_len(pos - (stop - n))
    elseif bit.band(flags, F_ACK) ~= 0 then
        local t = tree:add(aerotp, tvb(pos, math.min(stop - pos, 20)), "ACK")
        if not ack_fields(t) then return false end
    end
    if bit.band(flags, F_NACK) ~= 0 then
        if not need(2) then return false end
        local k = tvb(pos, 2):uint()
        local t = tree:add(aerotp, tvb(pos, math.min(stop - pos, 2 + 4 * k)), "NACK")
        t:add(pf.nack_count, tvb(pos, 2)); pos = pos + 2
        if not need(4 * k) then return false end
        for _ = 1, k do t:add(pf.nack_entry, tvb(pos, 4)); pos = pos + 4 end
    end
    if bit.band(flags, F_SNACK) ~= 0 then
        if not need(2) then return false end
        local k = tvb(pos, 2):uint()
        local t = tree:add(aerotp, tvb(pos, math.min(stop - pos, 2 + 8 * k)), "SNACK")
        if not pair_list(t, pf.snack_count, pf.snack_start, pf.snack_end) then return false end
    end
    if bit.band(flags, F_RPT) ~= 0 then
        if not need(24) then return false end
        local t = tree:add(aerotp, tvb(pos, 24), "RPT")
        t:add(pf.rpt_ber, tvb(pos, 4)); t:add(pf.rpt_tpdus, tvb(pos + 4, 4))
        t:add(pf.rpt_lost, tvb(pos + 8, 4)); t:add(pf.rpt_seen, tvb(pos + 12, 4))
        t:add(pf.rpt_wire_lost, tvb(pos + 16, 4)); t:add(pf.rpt_bursts, tvb(pos + 20, 4))
        pos = pos + 24
    end
    if bit.band(flags, F_RST) ~= 0 then
        local r = stop - pos
        if r > 256 then return false end
        if r > 0 then
            tree:add(pf.rst_reason, tvb(pos, r), tvb(pos, r):string(ENC_UTF_8))
        else
            tree:add(pf.rst_reason, ""):set_generated()
        end
        pos = stop
    end
    return pos == stop
end

-- A repair TPDU's body [off, off+n): the 18-byte repair header, then the symbol; returns
-- false unless the symbol is exactly symbol_bytes long and the reserved byte is 0.
-- A gateway flow's open record at the start of the ingress's stream (spec §10): shown when
-- the ASYN's body starts with its kind byte and parses whole; the stream bytes follow it.
local function dissect_gw_open(tvb, tree, off, n, dst_port)
    if n < 3 or tvb(off, 1):uint() ~= 0xA2 then return 0 end
    local flags = tvb(off + 1, 1):uint()
    if bit.band(flags, 0xC8) ~= 0 or tvb(off + 2, 1):uint() > 2 then return 0 end
    local pos = off + 3
    local custody, resume = bit.band(flags, 1) ~= 0, bit.band(flags, 2) ~= 0
    local need = 3 + ((custody or resume) and 8 or 0) + (resume and 8 or 0)
    local kind = bit.band(flags, 0x30)
    local dest_len = ({[0x00] = 0, [0x10] = 4, [0x20] = 16})[kind]
    if n < need + 1 then return 0 end
    if kind == 0x30 then dest_len = 1 + tvb(off + need, 1):uint() end
    local total = need + dest_len + (bit.band(flags, 4) ~= 0 and 2 or 0)
    if n < total then return 0 end
    local t = tree:add(pf.gw_open, tvb(off, total))
    t:add(pf.gw_flags, tvb(off + 1, 1))
    t:add(pf.gw_class, tvb(off + 2, 1))
    if custody or resume then t:add(pf.gw_flow, tvb(pos, 8)); pos = pos + 8 end
    if resume then t:add(pf.gw_in, tvb(pos, 8)); pos = pos + 8 end
    local port = dst_port
    if bit.band(flags, 4) ~= 0 then port = tvb(off + total - 2, 2):uint() end
    local dest
    if kind == 0x00 then dest = "egress default"
    elseif kind == 0x10 then dest = tostring(tvb(pos, 4):ipv4()) .. ":" .. port
    elseif kind == 0x20 then dest = "[" .. tostring(tvb(pos, 16):ipv6()) .. "]:" .. port
    else dest = tvb(pos + 1, dest_len - 1):string() .. ":" .. port end
    t:add(pf.gw_dest, tvb(pos, dest_len), dest)
    if bit.band(flags, 4) ~= 0 then t:add(pf.gw_port, tvb(off + total - 2, 2)) end
    return total
end

local function dissect_repair(tvb, tree, off, n)
    if n < 18 then return false end
    local t = tree:add(aerotp, tvb(off, n), "Repair")
    t:add(pf.rep_code, tvb(off, 1)); t:add(pf.rep_reserved, tvb(off + 1, 1))
    t:add(pf.rep_first, tvb(off + 2, 4)); t:add(pf.rep_span, tvb(off + 6, 2))
    t:add(pf.rep_index, tvb(off + 8, 2)); t:add(pf.rep_total, tvb(off + 10, 2))
    t:add(pf.rep_seed, tvb(off + 12, 4)); t:add(pf.rep_bytes, tvb(off + 16, 2))
    local len = tvb(off + 16, 2):uint()
    if len > 0 and n > 18 then t:add(pf.rep_symbol, tvb(off + 18, n - 18)) end
    local code = tvb(off, 1):uint()
    return (code == 1 or code == 2) and tvb(off + 1, 1):uint() == 0 and n == 18 + len
end

-- A CHALLENGE (or RETRY) body: kind, echoed timestamp, cookie, the sender's connection
-- identifier; an ECHO body: the cookie, the sender's connection identifier. Returns the type
-- word (RETRY for kind 1), or nil when the body is malformed.
local function dissect_admission(tvb, tree, flags, off, n)
    if flags == F_ECHO then
        if n ~= COOKIE_LEN + CID_LEN then return nil end
        local t = tree:add(aerotp, tvb(off, n), "Echo")
        t:add(pf.cookie, tvb(off, COOKIE_LEN))
        t:add(pf.cid, tvb(off + COOKIE_LEN, CID_LEN))
        return "ECHO"
    end
    if n ~= 5 + COOKIE_LEN + CID_LEN then return nil end
    local kind = tvb(off, 1):uint()
    if kind > 1 then return nil end
    local t = tree:add(aerotp, tvb(off, n), kind == 1 and "Retry" or "Challenge")
    t:add(pf.chal_kind, tvb(off, 1)); t:add(pf.chal_ts_echo, tvb(off + 1, 4))
    t:add(pf.cookie, tvb(off + 5, COOKIE_LEN))
    t:add(pf.cid, tvb(off + 5 + COOKIE_LEN, CID_LEN))
    return kind == 1 and "RETRY" or "CHALLENGE"
end

function aerotp.dissector(tvb, pinfo, tree)
    local total = tvb:len()
    if total < HEADER_LEN then return 0 end
    pinfo.cols.protocol = "AeroTP"
    local root = tree:add(aerotp, tvb(), "AeroTP")

    local vm = tvb(0, 1):uint()
    local flags = tvb(1, 1):uint()
    local seq = tvb(6, 4):uint()
    local dst_port = tvb(4, 2):uint()
    local p = tvb(14, 1):uint()
    local tag = tvb(15, 1):uint()
    local n = tvb(16, 2):uint()
    local stored_hec = tvb(18, 2):uint()
    local computed_hec = hec(tvb, 0, 18)
    local hec_ok = computed_hec == stored_hec
    local version, mode = bit.rshift(vm, 4), bit.band(vm, 0x07)
    local authed = bit.band(vm, AUTH_BIT) ~= 0

    local tname = type_name(flags, mode)
    local ti = root:add(pf.type, tname); ti:set_generated()
    local vi = root:add(pf.version, tvb(0, 1))
    if version ~= 1 then vi:add_proto_expert_info(ef.version) end
    local mi = root:add(pf.mode, tvb(0, 1))
    if mode > 6 then mi:add_proto_expert_info(ef.mode) end
    root:add(pf.auth, tvb(0, 1))
    local fl = root:add(pf.flags, tvb(1, 1))
    fl:append_text(" (" .. tname .. ")")
    for _, f in ipairs({ pf.f_asyn, pf.f_afin, pf.f_ack, pf.f_mack, pf.f_nack, pf.f_snack,
        pf.f_rst, pf.f_rpt }) do
        fl:add(f, tvb(1, 1))
    end
    root:add(pf.src_port, tvb(2, 2)); root:add(pf.dst_port, tvb(4, 2))
    root:add(pf.seq, tvb(6, 4))
    local reset = bit.band(flags, F_RST) ~= 0 and flags ~= F_REPAIR and flags ~= F_CHALLENGE
    root:add(reset and pf.rst_ts_echo or pf.timestamp, tvb(10, 4))
    root:add(pf.fec, tvb(14, 1)); root:add(pf.tag, tvb(15, 1)); root:add(pf.len, tvb(16, 2))
    local hi = root:add(pf.hec, tvb(18, 2))
    local hs = root:add(pf.hec_status, hec_ok and "good" or "bad"); hs:set_generated()
    if not hec_ok then
        root:add(pf.hec_computed, computed_hec):set_generated()
        hi:append_text(string.format(" [incorrect, should be 0x%04x]", computed_hec))
        hi:add_proto_expert_info(ef.hec_bad)
    end

    local info = string.format("%s %s seq=%u", tname, MODES[mode] or "reserved-mode", seq)
    local body_end = HEADER_LEN + n
    if total < body_end + CRC_LEN then
        root:add_proto_expert_info(ef.short,
            string.format("Datagram of %u bytes, header says %u", total, body_end + CRC_LEN))
        if total > HEADER_LEN then root:add(pf.data, tvb(HEADER_LEN)) end
        pinfo.cols.info = info .. (hec_ok and " [short]" or " [header check failed]")
        return total
    end

    local stored_crc = tvb(body_end, 4):uint()
    local computed_crc = crc32c(tvb, HEADER_LEN, n)
    local crc_ok = computed_crc == stored_crc

    -- The body proper: after the envelope's head and before its tag when authenticated.
    local b_off, b_len, encrypted = HEADER_LEN, n, false
    if authed then
        if n < AUTH_HEAD + TAG_LEN then
            root:add_proto_expert_info(ef.envelope,
                string.format("Body of %u bytes, the envelope needs %u", n, AUTH_HEAD + TAG_LEN))
            b_len = 0
        else
            local key_byte = tvb(HEADER_LEN, 1):uint()
            encrypted = bit.band(key_byte, 0x80) ~= 0
            local at = root:add(aerotp, tvb(HEADER_LEN, n), "Authentication envelope")
            at:add(pf.auth_key_id, tvb(HEADER_LEN, 1))
            at:add(pf.auth_encrypted, tvb(HEADER_LEN, 1))
            at:add(pf.auth_instance, tvb(HEADER_LEN + 1, 4))
            at:add(pf.auth_pn, tvb(HEADER_LEN + 5, 8))
            at:add(pf.auth_tag, tvb(HEADER_LEN + n - TAG_LEN, TAG_LEN))
            local st = at:add(pf.auth_status, "not verified (no key)"); st:set_generated()
            st:add_proto_expert_info(ef.unverified)
            b_off, b_len = HEADER_LEN + AUTH_HEAD, n - AUTH_HEAD - TAG_LEN
            info = info .. string.format(" auth key=%u%s", bit.band(key_byte, 0x7F),
                encrypted and " encrypted" or "")
        end
    end

    if authed and encrypted then
        if b_len > 0 then root:add(pf.ciphertext, tvb(b_off, b_len)) end
        info = info .. string.format(" len=%u", b_len)
    elseif bit.band(flags, F_CONTROL) == 0 then
        local rec = 0
        if bit.band(flags, F_ASYN) ~= 0 and seq == 0 and hec_ok and crc_ok
            and mode ~= MODE_DATAGRAM then
            rec = dissect_gw_open(tvb, root, b_off, b_len, dst_port)
        end
        if b_len > rec then root:add(pf.data, tvb(b_off + rec, b_len - rec)) end
        info = info .. string.format(" len=%u", b_len)
    elseif (flags == F_CHALLENGE or flags == F_ECHO) and hec_ok and crc_ok then
        local word = dissect_admission(tvb, root, flags, b_off, b_len)
        if not word then
            root:add_proto_expert_info(ef.body)
        elseif word ~= tname then
            -- aerotp.type stays CHALLENGE (the flags); the info column says RETRY.
            info = info:gsub("^" .. tname, word)
        end
    elseif flags == F_REPAIR and hec_ok and crc_ok then
        if not dissect_repair(tvb, root, b_off, b_len) then
            root:add_proto_expert_info(ef.body)
        end
    elseif hec_ok and crc_ok then
        -- RST and RPT together (with ASYN/AFIN beside them) is no control body (spec §7).
        if bit.band(flags, F_REPAIR) == F_REPAIR
            or not dissect_control(tvb, root, flags, b_off, b_len) then
            root:add_proto_expert_info(ef.body)
        end
    elseif n > 0 then
        -- A corrupted control body is shown raw: its parts cannot be trusted.
        root:add(pf.data, tvb(HEADER_LEN, n))
    end

    local ci = root:add(pf.crc, tvb(body_end, 4))
    local cs = root:add(pf.crc_status, crc_ok and "good" or "bad"); cs:set_generated()
    if not crc_ok then
        root:add(pf.crc_computed, computed_crc):set_generated()
        ci:append_text(string.format(" [incorrect, should be 0x%08x]", computed_crc))
        ci:add_proto_expert_info(ef.crc_bad)
    end

    local trailer = total - body_end - CRC_LEN
    if trailer > 0 then
        local pi = root:add(pf.parity, tvb(body_end + CRC_LEN, trailer))
        local want, m = fec_trailer(total, p)
        pi:append_text(string.format(" (%u codewords x %u bytes, corrects %u byte errors each)",
            m, p, math.floor(p / 2)))
        root:add(pf.codewords, m):set_generated()
        if want ~= trailer then pi:add_proto_expert_info(ef.parity) end
    elseif p > 0 then
        root:add_proto_expert_info(ef.parity, "FEC field set but no parity present")
    end

    if hec_ok then
        local a = analyse(pinfo, flags, seq, tag)
        if a.retx then
            local r = root:add(pf.retransmission, a.retx); r:set_generated()
            r:add_proto_expert_info(ef.retx)
            info = info .. " [retransmission]"
        elseif a.ooo then
            local o = root:add(pf.out_of_order, true); o:set_generated()
            o:add_proto_expert_info(ef.ooo)
            info = info .. " [out of order]"
        end
    end
    if not hec_ok then info = info .. " [header check failed]" end
    if not crc_ok then info = info .. " [CRC failed]" end
    if trailer > 0 then info = info .. string.format(" fec=p%u", p) end
    pinfo.cols.info = info
    return total
end

local function heuristic(tvb, pinfo, tree)
    if not aerotp.prefs.heuristic then return false end
    if not looks_like_aerotp(tvb) then return false end
    aerotp.dissector(tvb, pinfo, tree)
    return true
end

function aerotp.init()
    frame_info = {}
    directions = {}
end

local current_port = 0
function aerotp.prefs_changed()
    local udp = DissectorTable.get("udp.port")
    if current_port ~= 0 then udp:remove(current_port, aerotp) end
    current_port = aerotp.prefs.port
    if current_port ~= 0 then udp:add(current_port, aerotp) end
end

DissectorTable.get("udp.port"):add(aerotp.prefs.port, aerotp)
current_port = aerotp.prefs.port
aerotp:register_heuristic("udp", heuristic)
