"""Oracle Cloud's regions: identifier, three-letter region key and realm (what ``regionInfo`` says).

Facts from Oracle's published region list (the region keys of "Regions and Availability
Domains", as the OCI SDKs carry them). A region not in the table keeps its identifier, and its key
is the first three letters of the identifier's city part, upper case (``xx-somecity-1``: ``SOM``);
set ``clouds.oracle.region_key`` for such a region.
"""

from __future__ import annotations

from typing import Optional

# identifier key realm, one region a line
_TABLE = """
af-johannesburg-1 JNB oc1   ap-chuncheon-1 YNY oc1    ap-hyderabad-1 HYD oc1     ap-melbourne-1 MEL oc1
ap-mumbai-1 BOM oc1         ap-osaka-1 KIX oc1        ap-seoul-1 ICN oc1         ap-singapore-1 SIN oc1
ap-singapore-2 XSP oc1      ap-sydney-1 SYD oc1       ap-tokyo-1 NRT oc1         ca-montreal-1 YUL oc1
ca-toronto-1 YYZ oc1        eu-amsterdam-1 AMS oc1    eu-frankfurt-1 FRA oc1     eu-madrid-1 MAD oc1
eu-marseille-1 MRS oc1      eu-milan-1 LIN oc1        eu-paris-1 CDG oc1         eu-stockholm-1 ARN oc1
eu-zurich-1 ZRH oc1         il-jerusalem-1 MTZ oc1    me-abudhabi-1 AUH oc1      me-dubai-1 DXB oc1
me-jeddah-1 JED oc1         me-riyadh-1 RUH oc1       mx-monterrey-1 MTY oc1     mx-queretaro-1 QRO oc1
sa-bogota-1 BOG oc1         sa-santiago-1 SCL oc1     sa-saopaulo-1 GRU oc1      sa-valparaiso-1 VAP oc1
sa-vinhedo-1 VCP oc1        uk-cardiff-1 CWL oc1      uk-london-1 LHR oc1        us-ashburn-1 IAD oc1
us-chicago-1 ORD oc1        us-phoenix-1 PHX oc1      us-saltlake-2 AGA oc1      us-sanjose-1 SJC oc1
us-langley-1 LFI oc2        us-luke-1 LUF oc2         us-gov-ashburn-1 RIC oc3   us-gov-chicago-1 PIA oc3
us-gov-phoenix-1 TUS oc3    uk-gov-cardiff-1 BRS oc4  uk-gov-london-1 LTN oc4    ap-chiyoda-1 NJA oc8
ap-ibaraki-1 UKB oc8        me-dcc-muscat-1 MCT oc9   ap-dcc-canberra-1 WGA oc10 eu-dcc-dublin-1 ORK oc14
eu-dcc-dublin-2 SNN oc14    eu-dcc-milan-1 BGY oc14   eu-dcc-milan-2 MXP oc14    eu-dcc-rating-1 DUS oc14
eu-dcc-rating-2 DTM oc14    ap-dcc-gazipur-1 DAC oc15 eu-frankfurt-2 STR oc19    eu-madrid-2 VLL oc19
eu-jovanovac-1 BEG oc20     me-dcc-doha-1 DOH oc21    us-somerset-1 EBB oc23     us-thames-1 EBL oc23
eu-crissier-1 AVF oc24      eu-dcc-zurich-1 AVZ oc24  me-abudhabi-3 AHU oc26     me-abudhabi-2 RKT oc29
me-abudhabi-4 SHJ oc29      ap-chuncheon-2 BNO oc35   ap-seoul-2 DTZ oc35        ap-suwon-1 DLN oc35
"""
_WORDS = _TABLE.split()
REGIONS: dict[str, tuple[str, str]] = {_WORDS[i]: (_WORDS[i + 1], _WORDS[i + 2]) for i in range(0, len(_WORDS), 3)}
BY_KEY = {key.lower(): name for name, (key, _realm) in REGIONS.items()}
REALM_DOMAINS = {"oc1": "oraclecloud.com", "oc2": "oraclegovcloud.com", "oc3": "oraclegovcloud.com",
                 "oc4": "oraclegovcloud.uk", "oc8": "oraclecloud8.com", "oc9": "oraclecloud9.com",
                 "oc10": "oraclecloud10.com", "oc14": "oraclecloud14.com", "oc15": "oraclecloud15.com",
                 "oc19": "oraclecloud.eu", "oc20": "oraclecloud20.com", "oc21": "oraclecloud21.com",
                 "oc23": "oraclecloud23.com", "oc24": "oraclecloud24.com", "oc26": "oraclecloud26.com",
                 "oc29": "oraclecloud29.com", "oc35": "oraclecloud35.com"}


def identifier(name: str) -> str:
    """``us-ashburn-1`` for ``us-ashburn-1`` or its key ``iad`` (any case); else ``name`` itself."""
    return name if name in REGIONS else BY_KEY.get(name.lower(), name)


def region_info(name: str, key: Optional[str] = None) -> dict[str, str]:
    """``regionInfo`` of the region ``name`` (identifier or key); ``key`` overrides the table's."""
    region = identifier(name)
    known = REGIONS.get(region)
    if known is not None:
        region_key, realm = known
    else:
        parts = region.split("-")
        region_key, realm = (parts[1] if len(parts) > 2 else region)[:3].upper(), "oc1"
    return {"realmDomainComponent": REALM_DOMAINS[realm], "realmKey": realm, "regionIdentifier": region,
            "regionKey": key or region_key}
