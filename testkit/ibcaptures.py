"""A small InfiniBand capture in the shapes real `ibnetdiscover -g` prints, shared by the reader's tests, the
hostile-input tests and the fuzzer's seeds."""

# One leaf, one spine, two HCAs, in the three spellings of a GUID: `S-`/`H-` ids zero-padded to 16 digits,
# `switchguid=` and the parenthesised port GUIDs without padding. With -g's `[ext N]` and Chassis lines.
SMALL = """#
# Topology file: generated on Mon Nov 30 02:03:31 2026
Chassis 1 (guid 0x2c9030000abcd)
Non-Chassis Nodes

vendid=0x2c9
switchguid=0x2c90300001234(2c90300001234)	#
Switch	36 "S-0002c90300001234"		# "MF0;R1-LEAF-01:MQM8790/U1" enhanced port 0 lid 3 lmc 0
[1][ext 1]	"H-0002c90300005670"[1](2c90300005671) 		# "node-a mlx5_0" lid 7 4xHDR
[2]	"H-0002c90300005680"[1](2c90300005681) 		# "MT4129 ConnectX7   Mellanox Technologies" lid 8 4xHDR s=5 w=2 v=4
[35]	"S-0002c90300009999"[1][ext 3]		# "R1-SPINE-01" lid 1 1xHDR

switchguid=0x2c90300009999(2c90300009999)
Switch	36 "S-0002c90300009999"		# "R1-SPINE-01" base port 0 lid 1 lmc 0
[1]	"S-0002c90300001234"[35]		# "MF0;R1-LEAF-01:MQM8790/U1" lid 3 1xHDR

caguid=0x2c90300005670
Ca	1 "H-0002c90300005670"		# "node-a mlx5_0"
[1](2c90300005671) 	"S-0002c90300001234"[1]		# lid 7 lmc 0 "MF0;R1-LEAF-01:MQM8790/U1" lid 3 4xHDR

caguid=0x2c90300005680
Ca	1 "H-0002c90300005680"		# "MT4129 ConnectX7   Mellanox Technologies"
[1](2c90300005681) 	"S-0002c90300001234"[2]		# lid 8 lmc 0 "MF0;R1-LEAF-01:MQM8790/U1" lid 3 4xHDR
"""
