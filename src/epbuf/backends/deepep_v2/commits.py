"""Which DeepEP V2 generation's size formulas hold at each known upstream commit.

A static table, built once at development time (no git at run time) from every commit of the
``deepseek-ai/DeepEP`` snapshot (``main`` up to ``dd758ca`` plus its pull-request refs up to
2026-07-24) whose tree holds ``csrc/elastic/buffer.hpp``. For each commit the size arithmetic was
compared, whitespace and comments aside, with the two anchors ``b306af0`` (``"2026-04"``) and
``dd758ca`` (``"2026-07"``): the bodies of ``get_dispatch_buffer_size``, ``get_combine_buffer_size``,
``calculate_buffer_size`` and the ``kNumMaxChannels`` / workspace-alignment lines of
``csrc/elastic/buffer.hpp``; ``TokenLayout``, ``BufferLayout`` and ``WorkspaceLayout`` of
``deep_ep/include/deep_ep/common/layout.cuh``; ``get_physical_domain_size`` /
``get_logical_domain_size`` of ``csrc/kernels/backend/nccl.cu``; ``get_dispatch_token_layout`` /
``get_combine_token_layout`` of ``csrc/kernels/elastic/{dispatch,combine}.hpp``; ``sf_pack_t`` and
``kNumMaxChannels`` of ``compiled.cuh``, ``kNumTMAAlignBytes`` of ``ptx.cuh``, ``kNumAlignmentBytes``
of ``csrc/kernels/backend/symmetric.hpp``; and ``ElasticBuffer.get_buffer_size_hint`` of
``deep_ep/buffers/elastic.py``. 115 commits match an anchor; the 6 in :data:`DIFFERENT` change the
arithmetic and are named so that asking for them gives a precise error.

The refactored ``EPBuffer`` tree (``"refactor"``) is in no ref of the snapshot; its commits are
the ones the formulas were read at (``docs/derivations/deepep_v2.md`` §B.0), two of them known only
by their short id.
"""

from __future__ import annotations

__all__ = ["COMMITS", "DIFFERENT", "SHORT_IDS"]

_A_2026_04 = """
018f21ea62c6c2888d9b46806aad6d90b399b23d
0aad0cf86fa215775a240afcc787b8b99d0a2e92
146cc356aa00c39ac1590c05775e05b0f031e70c
164c82d7207d0dba8e815626849130e595fdd063
189df34663dba544367607ff4a9f1916e4a33959
1b3e129e975ffcbda2535f277eab495316f2cdf2
22c82cc1a6b6a58be2460061c0d82a423d38c3dd
279fcabaa13c6ad70fddf868886455e0053c5d3e
34a8c7ed72123349eed9cc2d8e6c3dd61df9ae6c
3e490fb6f9e3949c07a3a2a4db70cb2162833a34
41518903e065390a0532be9ce6f8b922bdf53061
4315189e0f38995c86d4fca26ce708a9d2654dcd
4f77720db4a4db55200b431517bae07d580f1a76
62a38bf06a3823253a98e21807df29f92df11227
6305c4694d10df2c8d292dfcd229a771ecd68662
64a8584df774f8857d9b7ab2bb24094a8af0852d
76f14279f110278fec8e9b1a78b7a76c226c1845
77055513b0337198678e21b134515392df83dee2
7b6ba19fa09f2f4ac4153168f689a63c2d06d6cd
a59a593bfbcdc435d2620c8f4a781575c6e7ecbf
a6c8525998ca32fa9e75b8235498907dce8f272e
b10da11f0a16c167f715973d7782edb2984da9de
b1f081c0aae5f9f0f53f1f4fe07f027dd534b828
b306af06afd412c88e51e71802951606e40b7358
bae7664ba05930a49a69df83af66adf92476c891
ce78b03cdf5193aedf8dddb831bdffd7b741b9f5
d7d1cdce4abef18f3b9b09150d47cf8df8de1531
fa8a9b16898204afd347c663b89e65ef87dc6ce6
""".split()

_A_2026_07 = """
086f58bdc3172c35acbddee6da94688113c2f4b9
099d5f2bad488b9c534ea785062b12f2e91d1d41
0c61b28c90668c6b2e49dc4105e8277f13f3e6a2
0cf131c73b1bdcced2da9d8066fa81a390f8df11
0cf14f2811c5d9e880b1f1850b1bf6ddd5769ac6
0f3587cda5e695078fcdf2068f95db897496e310
0f6a826034915d117e58f0398d2aa503099288a3
1185547946bd549d804f8329442785c1976a93c8
135626089dc49cabc9195f642aee294f57ec7f55
14f245322417008ea41629cd2d05a80d8f4312a9
15bac1860c338fd60ea415d6ebbcfa66fa960052
17b47bc816ac70c462e4557ae1e5c9e0cae0549e
17dc7c6bdc1a049c5f89f1bc7ea6121a409decff
18525a64c9ef77050503719c1a06298b32401aad
1c287dd0c74a6b0333702c5b92eaca6c77408c26
1e466384122a8295ad267032bb0f28c9b18284fe
1ed3fbb53a6539f4c5f2ad4c8123a7edab7d444a
20aa88b9b8b5719bc58aa67b23c7851482177283
2297b88a85a664db4fb088c4c9044add7150cd29
26901a2f6d7e118c4764013ab6322fbc2c244138
28bd9e6a268df53e65362af3fb0e5ff10467d39a
28efbacdfb65da9699bf109c1049157fb60287b0
2c5745a23ed1f985dc166588e94f502d64ab8780
2c70ee1215bfd02299d8c14654572dfa700b169e
2dfbdb9e61e288add39db2f06c6333fcffd92bf0
3528514a6c3dac39e53d39cf67c7fffd49e23487
35d13af415fb812d45dd004ed62fe61a98534198
389e8ffa967c37e0989c19c57eebe955a5d44628
3caa7ed3108645cbe87fec37886ceb11c4fdfcd0
3f0cfd70a49b428f3fcdc103b523ff136397b38b
40a8a8e8db7ec66b4deec9089867c88d18f46cdd
4112ce091de2659ded17d2bc1540cddcf13e7366
414bdd96f41cc32826c935e97e585b7e6ee63b16
44941a76e9600d7096087ae5378a44056f0e20b0
452265872732616ff27e53b148e8377def35ae98
45c96fa945081bd14d598ef294daf64cbded4b5f
499366d2412aa789437bd3475e8174d5a5d0c7fb
4ab6aa3c94d424173e625edba1a53765f5300132
51885bd741da12ce63baf594fb4f8c6aaae0e16d
532d7e21d3f476efb9082300254d515174c57cb5
56169594eb83e882124d6b8ad43e56303e798926
5c4f2b8f5adcdbe57008c400658b119775b480c9
60d44037a702f651a6e18bd4aea65ed8409051c2
723716fc11ee44cbd87035fe9c3a360feca33528
747ea8edb68fa30f6e6fd664c754bbeb24b79dc6
7b6cc690e1ce23b96e0f1c13559df911e30666c7
8027faa93df3a6cb83cd46e0cee2585fcc279764
81a433ef5687cf5e7ca194b6a8b8188990af1a50
87d8305cecba451479c516944fdf213c7f08bfcc
8b9fc957774ffaec050eedcf4407f2ce9bc9cc30
91848ed26dcda97aae54bddbf3663257e678a388
93d0564188f7a0a6288c6e316484861b0efa042e
9eadee028b7ef84a359e98b1335cb467ac8316a8
a1b3af393843dda98c270b5c98a49bb505e38e34
a422b5a3693ff8b72a8ab414677c0acb57b5ffcb
a7113cd0deff599d88a52c54df6641dff091e368
a9b3fae8c73765a7631608ebad892952f7f436e5
abe35423f5c197332b16cb30a90156602dd40eb8
acfbae86439f2c4a6381ec18149753b05dcebee8
aeaf4370c3f48f7632a1b5d33b5420cde12a60ff
af9a0403188392824fc3057452822235873e0612
b55138cd9e85fce6e5b6a9188cde39b4219dd0f3
b55e3c18a254af073c088d0e151f575224dba2bc
b9ef9b3f2e8dc33e5acf8e4826aab65c41fd5b77
bb29c6bfd033ff255e7cc4b4971f3148f7603b95
bb7ffab4aa85e5a4f56450636aa0e30cf49eeaf5
c3cb61de428617c655283a845676f8446b6ce6c2
cb0f37ec46cd8e41d93d38490137ae08dea2bbd8
cec9a2acc35e38234c4fdfb677d306d6778b5a70
d26828097e1100db82ac1d7698c29b7c4ab95eb0
d2be99a22990606775dd21623ddfa1a702e42e91
d389e22166516dd4d68c7179e3bd497ea49ddd54
d4f41e4e93602a15e95f55f6ee8df8f1aaa0e4bb
dd038e14a5b62b1293f771b4c60b8f318d570e4f
dd1c1d1ed2bb2bff34927d7d3bd5a72069eba94a
dd758caf451848bd150e1046af3d0a73e5fff38d
df07e6252668066fd5efe47b7eb011d49ab5b4ab
ea2a3b0d6a5e661b2c9a3f25a1443082c4aaedd5
ee79774c6dabea3232760004f2973847336c81d0
ef2ae56ef54583ce60c1c327abab750ba8a43395
f26be9f1ee35cdc3ec576c858b605e713c3ec04a
f352c7b046742772fdd0dc6c20e98d8dfb119151
f36b0ecbe95459891d2afacf50795ac13ca11557
fc3dc88a59d96d233ae2f17b6138d5c7169f2077
fdaa64b5448e2c174ea01da2c41bab1131b46d13
feb23d623b1f1a1a7c4f321c6b0ff9940dbba90a
ff75d3cb84662fc90671c4ee013e6447f54257c5
""".split()

_REFACTOR = (
    "1a1ffbac1f9ba94e1f731f7647b5d6353fb38ade",  # token.cuh
    "def865146e95aa9ea223e277c0a8a4c6b81e5ac7",  # ep.hpp, workspace.cuh, compiled.cuh
)

#: Commits known only by a short id (read from a code index), matched as prefixes.
SHORT_IDS: dict[str, str] = {
    "2578e50": "refactor",  # csrc/kernels/ep/dispatch.hpp; ep.hpp size functions identical
    "855fa9d": "refactor",  # csrc/kernels/comm/context.cpp, impls/ep/*.cuh
    "13b3abaa": "refactor",  # deep_ep/buffers/ep.py
}

#: Commits whose size arithmetic matches no generation epbuf follows: full id -> what changes.
DIFFERENT: dict[str, str] = {
    "20527c3c16855a0b99c8eeab8a178de4dd96eb8d": "pull-request merge ref: the hint adds an experimental direct recv_x region",
    "35fd2654daacbf9627ef606cc47dcdf3f075570b": "unmerged branch: calculate_buffer_size takes has_nvlink",
    "6757592e03f28eba9a11c3e2170af06ebd284ebc": "unmerged branch: the hint adds an experimental direct recv_x region",
    "df891d86a26f2d79772dd02d1d4ed99c17ff6b86": "unmerged branch: counted dispatch changes the dispatch buffer",
    "e54b299adb7714ae46aaafe87b64f5bdc79683fc": "pull-request merge ref: TokenLayout gains num_topk aux-weight floats",
    "fb73fe94d0bd0b11e97924644265797754b7f608": "unmerged branch: TokenLayout gains num_topk aux-weight floats",
}

#: Full commit id -> generation id.
COMMITS: dict[str, str] = {
    **dict.fromkeys(_A_2026_04, "2026-04"),
    **dict.fromkeys(_A_2026_07, "2026-07"),
    **dict.fromkeys(_REFACTOR, "refactor"),
}
