-- Wireshark dissector for rmtrace records (pcapng written by `rmtrace export --format pcapng`).
--
-- Written out by `rmtrace export --dissector DIR`: this code is the template, and every
-- number and name it uses (header layout, operation names, field offsets, classes, controls,
-- status codes) is in the table T below, generated from one driver profile by
-- rmtrace/export/dissector.py.  Nothing here knows a driver version.
--
--   tshark -X lua_script:DIR/rmtrace.lua -r run1.pcapng -V
--   tshark -X lua_script:DIR/rmtrace.lua -r run1.pcapng -Y 'rmtrace.status != "NV_OK"'
--
-- Each packet is one record: the header, then its tagged buffers; the names come from the
-- fields the Python decoders read (the escape and the control command or class it names, the
-- NV_STATUS of the AFTER copy, the UVM command, the RPC function, sequence and result, the
-- sema op and its rc).

local T = {}
--[[ TABLES ]]

local rmtrace = Proto("rmtrace", "rmtrace record")
local F = {}
local HF = {}

local function header_field(prefix, f, labels)
  local abbr = prefix .. f.name
  if labels[f.name] then
    return ProtoField.uint32(abbr, f.name, base.DEC, labels[f.name])
  elseif f.size == 8 then
    return f.signed and ProtoField.int64(abbr, f.name) or ProtoField.uint64(abbr, f.name)
  elseif f.signed then
    return ProtoField.int32(abbr, f.name)
  end
  return ProtoField.uint32(abbr, f.name, (f.name == "magic" or f.name == "addr") and base.HEX or base.DEC)
end

for _, f in ipairs(T.header) do
  HF[f.name] = header_field("rmtrace.", f, {source = T.sources, phase = T.phases})
end
local BF = {}
for _, f in ipairs(T.buffer) do
  BF[f.name] = header_field("rmtrace.buffer.", f, {role = T.roles, when = T.whens})
end
F.buffer = ProtoField.bytes("rmtrace.buffer.data", "data")
F.name = ProtoField.string("rmtrace.name", "operation")
F.detail = ProtoField.string("rmtrace.detail", "detail (class or control command)")
F.status = ProtoField.string("rmtrace.status", "status")
F.escape = ProtoField.string("rmtrace.rm.escape", "RM escape")
F.class = ProtoField.string("rmtrace.rm.class", "class")
F.class_id = ProtoField.uint32("rmtrace.rm.class_id", "class id", base.HEX)
F.control = ProtoField.string("rmtrace.rm.control", "control command")
F.cmd = ProtoField.uint32("rmtrace.rm.cmd", "control command id", base.HEX)
F.nv_status = ProtoField.uint32("rmtrace.nv_status", "NV_STATUS", base.HEX)
F.uvm = ProtoField.string("rmtrace.uvm.command", "UVM command")
F.rpc_function = ProtoField.string("rmtrace.gsp.function", "RPC function")
F.rpc_sequence = ProtoField.uint32("rmtrace.gsp.sequence", "RPC sequence")
F.rpc_result = ProtoField.uint32("rmtrace.gsp.rpc_result", "rpc_result", base.HEX)
F.sema_op = ProtoField.string("rmtrace.sema.op", "sema op")
F.sema_rc = ProtoField.int32("rmtrace.sema.rc", "rc")
F.sema_channel = ProtoField.uint32("rmtrace.sema.channel", "channel", base.HEX)
F.sema_rank = ProtoField.uint32("rmtrace.sema.rank", "rank")
F.sys = ProtoField.string("rmtrace.sys.op", "system op")
F.mark = ProtoField.string("rmtrace.mark.op", "mark")

local fields = {}
for _, t in ipairs({HF, BF, F}) do
  for _, v in pairs(t) do fields[#fields + 1] = v end
end
rmtrace.fields = fields

local profile_mismatch = ProtoExpert.new("rmtrace.profile", "records named with another driver profile",
                                         expert.group.PROTOCOL, expert.severity.WARN)
local short = ProtoExpert.new("rmtrace.short", "record shorter than its header says",
                              expert.group.MALFORMED, expert.severity.ERROR)
rmtrace.experts = {profile_mismatch, short}
local interface_description = Field.new("frame.interface_description")

-- values ---------------------------------------------------------------------------------------

local function u32(tvb, offset) return tvb(offset, 4):le_uint() end
local function i32(tvb, offset) return tvb(offset, 4):le_int() end

-- A field's value as a Lua number, and for 8-byte fields also as the exact Int64/UInt64
-- (a number above 2^53 would print rounded).
local function read(tvb, f, base)
  local r = tvb((base or 0) + f.offset, f.size)
  if f.size == 8 then
    local exact = f.signed and r:le_int64() or r:le_uint64()
    return exact:tonumber(), exact
  elseif f.size == 4 then
    return f.signed and r:le_int() or r:le_uint()
  end
  return r:le_uint()
end

local function hex8(v) return string.format("0x%08x", v) end
local function errno_name(n) return T.errno[n] or ("errno " .. n) end
local function status_name(code) return T.status[code] or hex8(code) end

-- Names a control command as the Python decoders do (decoders/names.py): the profile's name,
-- else the interface prefix, the category's name and the index, else numbers.
local function control_name(cmd)
  local name = T.controls[cmd]
  if name then return name end
  local cls, category, index = math.floor(cmd / 65536), math.floor(cmd / 256) % 256, cmd % 256
  local prefix = T.prefixes[cls]
  if prefix == nil and T.classes[cls] == nil and cls ~= 0 then
    return string.format("CTRL_CMD_0x%08x", cmd)
  end
  prefix = prefix or string.format("NV%04X", cls)
  local cat = T.categories[cls * 256 + category % 64]
  if cat == nil then
    return string.format("%s_CTRL_CMD_0x%02x_0x%02x", prefix, category, index)
  end
  return string.format("%s_CTRL_CMD_%s_0x%02x", prefix, cat, index)
end

local function class_name(id)
  return T.classes[id] or string.format("class 0x%04x", id)
end

local function unknown(source, op)
  return string.format("%s_OP_0x%x", T.sources[source] or tostring(source), op)
end

-- the record's buffers ------------------------------------------------------------------------

local function buffers(tvb, hdr, tree)
  local out = {}
  local pos = hdr.header_size
  for i = 1, hdr.nbufs do
    if pos + T.buffer_size > tvb:len() then break end
    local b = {}
    for _, f in ipairs(T.buffer) do b[f.name] = read(tvb, f, pos) end
    b.offset = pos + T.buffer_size
    local label = string.format("buffer %d: %s/%s, %d bytes", i - 1, T.roles[b.role] or b.role,
                                T.whens[b.when] or b.when, b.len)
    local sub = tree:add(rmtrace, tvb(pos, math.min(T.buffer_size + b.len, tvb:len() - pos)), label)
    for _, f in ipairs(T.buffer) do sub:add_le(BF[f.name], tvb(pos + f.offset, f.size)) end
    if b.len > 0 and b.offset + b.len <= tvb:len() then
      sub:add(F.buffer, tvb(b.offset, b.len))
    end
    out[#out + 1] = b
    pos = b.offset + b.len + (8 - b.len % 8) % 8
  end
  return out
end

local function find(bufs, role, when)
  for _, b in ipairs(bufs) do
    if b.role == role and (when == nil or b.when == when) then return b end
  end
  return nil
end

local function fits(tvb, b, offset, size) return offset ~= nil and b.len >= offset + size and b.offset + offset + size <= tvb:len() end

-- per source ------------------------------------------------------------------------------------

-- An ioctl (RM or UVM): the argument struct's layout by its size, the naming field, the status
-- of the AFTER copy (decoders/ioctl.py: an errno or a negative return first, then NV_STATUS).
local function spec_for(entry, b)
  if b == nil then return entry.default end
  return entry.sizes[b.len] or entry.default
end

local function ioctl_status(tvb, hdr, entry, bufs, arg_role)
  if hdr.phase ~= T.phase.EXIT then return nil end
  if hdr.ret < 0 or hdr.err ~= 0 then
    return hdr.err ~= 0 and errno_name(hdr.err) or ("ret " .. tostring(hdr.exact.ret))
  end
  local after = find(bufs, arg_role, T.when.AFTER)
  local spec = spec_for(entry, after)
  if after == nil or spec == nil or after.len < spec.size then return "ret " .. tostring(hdr.exact.ret) end
  if spec.status == nil or not fits(tvb, after, spec.status, 4) then return tostring(hdr.exact.ret) end
  return status_name(u32(tvb, after.offset + spec.status)), u32(tvb, after.offset + spec.status)
end

local function dissect_ioctl(tvb, hdr, bufs, tree, out)
  local ops = hdr.source == T.source.RM and T.rm or T.uvm
  local entry = ops[hdr.op]
  if entry == nil then out.name = unknown(hdr.source, hdr.op) return end
  local arg_role = T.role.ARG
  if entry.kind == "xfer" then
    -- IOCTL_XFER_CMD carries another escape's argument (the XFER buffer): named as that escape
    local arg = find(bufs, T.role.ARG)
    local spec = spec_for(entry, arg)
    local inner = arg and spec and fits(tvb, arg, spec.key, 4) and T.rm[u32(tvb, arg.offset + spec.key)]
    if not inner then out.name = entry.name out.unknown = true return end
    entry, arg_role = inner, T.role.XFER
  end
  out.name = entry.name
  if hdr.source == T.source.RM then tree:add(F.escape, entry.name) else tree:add(F.uvm, entry.name) end
  local arg = find(bufs, arg_role)
  if arg and entry.kind == "control" then
    local spec = entry.default
    if spec and fits(tvb, arg, spec.key, 4) then
      local cmd = u32(tvb, arg.offset + spec.key)
      out.detail = control_name(cmd)
      tree:add(F.control, out.detail)
      tree:add(F.cmd, tvb(arg.offset + spec.key, 4), cmd)
    end
  elseif arg and entry.kind == "alloc" then
    local spec = entry.sizes[arg.len]
    if spec and fits(tvb, arg, spec.key, 4) then
      local id = u32(tvb, arg.offset + spec.key)
      out.detail = class_name(id)
      tree:add(F.class, out.detail)
      tree:add(F.class_id, tvb(arg.offset + spec.key, 4), id)
    end
  end
  local status, code = ioctl_status(tvb, hdr, entry, bufs, arg_role)
  out.status = status
  if code then tree:add(F.nv_status, code) end
end

local function dissect_gsp(tvb, hdr, bufs, tree, out)
  local entry = T.gsp[hdr.op]
  out.name = entry and entry.name or unknown(hdr.source, hdr.op)
  tree:add(F.rpc_function, out.name)
  local msg = find(bufs, T.role.PAYLOAD)
  local h = T.gsp_header
  if msg == nil or h == nil or msg.len < h.size then return end
  local sequence = u32(tvb, msg.offset + h.sequence)
  local result = u32(tvb, msg.offset + h.rpc_result)
  tree:add(F.rpc_sequence, tvb(msg.offset + h.sequence, 4), sequence)
  tree:add(F.rpc_result, tvb(msg.offset + h.rpc_result, 4), result)
  out.sequence = sequence
  if entry == nil then return end
  if entry.detail and fits(tvb, msg, h.size + entry.detail.offset, 4) then
    local value = u32(tvb, msg.offset + h.size + entry.detail.offset)
    out.detail = entry.detail.kind == "control" and control_name(value) or class_name(value)
    tree:add(entry.detail.kind == "control" and F.control or F.class, out.detail)
  end
  -- a response (a RECV of a function, not an event) carries the result: rpc_result, and when
  -- that is NV_OK, the status inside the payload
  if hdr.phase == T.phase.RECV and not entry.event then
    local status = result
    if result == 0 then
      status = 0
      if entry.status and msg.len >= h.size + entry.size then status = u32(tvb, msg.offset + h.size + entry.status) end
    end
    out.status = status_name(status)
    tree:add(F.nv_status, status)
  end
end

local function dissect_sema(tvb, hdr, bufs, tree, out)
  local entry = T.sema[hdr.op]
  out.name = entry and entry.name or unknown(hdr.source, hdr.op)
  tree:add(F.sema_op, out.name)
  local msg = find(bufs, T.role.PAYLOAD)
  if entry == nil or msg == nil then return end
  local body = T.sema_header.size
  if entry.channel and fits(tvb, msg, body + entry.channel, 4) then
    tree:add(F.sema_channel, tvb(msg.offset + body + entry.channel, 4), u32(tvb, msg.offset + body + entry.channel))
  end
  if entry.rank and fits(tvb, msg, body + entry.rank, 4) then
    tree:add(F.sema_rank, tvb(msg.offset + body + entry.rank, 4), u32(tvb, msg.offset + body + entry.rank))
  end
  if entry.rc and fits(tvb, msg, body + entry.rc, 4) then
    local rc = i32(tvb, msg.offset + body + entry.rc)
    tree:add(F.sema_rc, tvb(msg.offset + body + entry.rc, 4), rc)
    if rc == 0 then out.status = "0"
    elseif rc < 0 then out.status = rc .. " " .. errno_name(-rc)
    else out.status = tostring(rc) end
  end
end

-- A system record's result (decoders/system.py): the header field the op names (ret or fd),
-- -1 with the errno when it failed; none on an ENTER.
local function dissect_sys(tvb, hdr, bufs, tree, out)
  local entry = T.sys[hdr.op]
  out.name = entry and entry.name or unknown(hdr.source, hdr.op)
  tree:add(F.sys, out.name)
  if entry == nil or entry.result == nil or hdr.phase == T.phase.ENTER then return end
  if hdr.ret < 0 or hdr.err ~= 0 then
    out.status = hdr.err ~= 0 and ("-1 " .. errno_name(hdr.err)) or "-1"
  else
    out.status = tostring(entry.result == "ret" and hdr.exact.ret or hdr.fd)
  end
end

local function dissect_mark(tvb, hdr, bufs, tree, out)
  out.name = T.mark[hdr.op] or unknown(hdr.source, hdr.op)
  tree:add(F.mark, out.name)
end

local BY_SOURCE = {
  [T.source.RM] = dissect_ioctl, [T.source.UVM] = dissect_ioctl, [T.source.GSP] = dissect_gsp,
  [T.source.SEMA] = dissect_sema, [T.source.SYS] = dissect_sys, [T.source.MARK] = dissect_mark,
}

-- the dissector -------------------------------------------------------------------------------

function rmtrace.dissector(tvb, pinfo, tree)
  if tvb:len() < T.header_size then return 0 end
  pinfo.cols.protocol = "RMTRACE"
  local root = tree:add(rmtrace, tvb())
  local hdr = {}
  local htree = root:add(rmtrace, tvb(0, T.header_size), "record header")
  local exact = {}
  for _, f in ipairs(T.header) do
    hdr[f.name], exact[f.name] = read(tvb, f)
    htree:add_le(HF[f.name], tvb(f.offset, f.size))
  end
  hdr.exact = exact
  if hdr.total_len > tvb:len() then root:add_proto_expert_info(short) end
  local bufs = buffers(tvb, hdr, root)
  local out = {}
  local decoded = root:add(rmtrace, tvb(0, T.header_size), "decoded")
  local dissect = BY_SOURCE[hdr.source]
  if dissect then dissect(tvb, hdr, bufs, decoded, out) else out.name = unknown(hdr.source, hdr.op) end
  decoded:add(F.name, out.name)
  if out.detail then decoded:add(F.detail, out.detail) end
  if out.status then decoded:add(F.status, out.status) end
  decoded:append_text(": " .. out.name .. (out.detail and ("(" .. out.detail .. ")") or "")
                      .. (out.status and (" = " .. out.status) or ""))
  local described = interface_description()
  if described and not tostring(described):find("profile " .. T.profile, 1, true) then
    root:add_proto_expert_info(profile_mismatch, "this dissector was generated from profile " .. T.profile)
  end
  pinfo.cols.info = string.format("%s %d/%d %s%s%s", T.phases[hdr.phase] or hdr.phase, hdr.pid, hdr.tid,
                                  out.name, out.detail and ("(" .. out.detail .. ")") or "",
                                  out.status and (" = " .. out.status) or "")
  return tvb:len()
end

local encap = DissectorTable.get("wtap_encap")
for index, _ in pairs(T.linktypes) do
  encap:add(wtap_encaps["USER" .. index], rmtrace)
end
